"""Agent and cloud together (docs/design.md section 8): pairing, sync under RLS, outages, refusals,
identity flowing down."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import aiohttp

from agent.sync.link import CloudLink, sync_key_path
from agent.web.keys import DATABASE
from cloud.store.db import Database as CloudDatabase
from protocol.keyfile import load_or_create_private_key
from protocol.sync import AGENT_HEADER, SIGNATURE_HEADER, Batch, encode_batch
from tests.conftest import Agent
from tests.e2e.conftest import CLOUD_PASSWORD, LiveCloud
from tests.e2e.helpers import FAST_SYNC, add_readings, eventually, paired_state
from tests.support.reading_seed import add_device


async def _farm_with_device(agent: Agent) -> tuple[str, str]:
    resp = await agent.client.post(
        "/api/v1/farms/", json={"name": "North site"}, headers=agent.auth()
    )
    assert resp.status == 201, await resp.text()
    farm_id = (await resp.json())["id"]
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    return farm_id, device_id


async def _cloud_count(cloud: LiveCloud, sql: str, *args: Any) -> int:
    return int((await cloud.sql(sql, *args))[0][0])


async def _healthz(agent: Agent) -> dict[str, str]:
    resp = await agent.client.get("/healthz")
    checks: dict[str, str] = (await resp.json())["checks"]
    return checks


async def _worker_on_a_synced_farm(cloud: LiveCloud, agent: Agent) -> tuple[str, str]:
    """A farm made on the agent and mirrored, and a cloud operator who may read it: the farm's
    and the worker's ids (the worker logs in as worker@cloud.test with CLOUD_PASSWORD)."""
    farm_id, _ = await _farm_with_device(agent)
    worker_id = await cloud.add_user("operator", "worker@cloud.test")

    async def farm_in_cloud() -> bool:
        count = await _cloud_count(cloud, "SELECT count(*) FROM farms WHERE id = $1", UUID(farm_id))
        return count == 1

    await eventually(farm_in_cloud, "farm mirrored")
    await cloud.sql(
        "INSERT INTO permissions (user_id, farm_id, permission_type) VALUES ($1, $2, 'read_only')",
        UUID(worker_id),
        UUID(farm_id),
    )
    return farm_id, worker_id


async def test_paired_agent_syncs_hierarchy_and_readings_visible_to_owner_only(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    owner_id, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    farm_id, device_id = await _farm_with_device(agent)
    await add_readings(tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, 500)

    async def arrived() -> bool:
        return await _cloud_count(cloud, "SELECT count(*) FROM readings") == 500

    await eventually(arrived, "500 readings in the cloud")
    owner_token = await cloud.login(owner_email)
    async with aiohttp.ClientSession() as session:
        async with session.get(
            f"{cloud.url}/api/v1/farms/{farm_id}",
            headers={"Authorization": f"Bearer {owner_token}"},
        ) as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.json())["name"] == "North site"
        stranger = await cloud.add_user("user", "stranger@cloud.test")
        assert stranger
        token = await cloud.login("stranger@cloud.test")
        async with session.get(
            f"{cloud.url}/api/v1/farms/{farm_id}", headers={"Authorization": f"Bearer {token}"}
        ) as resp:
            assert resp.status == 404
    db = await CloudDatabase.connect(cloud.db.app_dsn, cloud.db.system_dsn)
    try:
        async with db.as_user(UUID(owner_id)) as conn:
            assert await conn.fetchval("SELECT count(*) FROM readings") == 500
        async with db.as_user(UUID(stranger)) as conn:
            assert await conn.fetchval("SELECT count(*) FROM readings") == 0
    finally:
        await db.close()

    connectivity = await (await agent.client.get("/supabase-items")).json()
    assert connectivity["status"] == "connected"
    assert connectivity["last_sync"] is not None


async def test_cloud_outage_then_every_reading_arrives_exactly_once(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    _, device_id = await _farm_with_device(agent)
    db_path = tmp_path / "state" / "agent.db"
    await add_readings(db_path, device_id, 1_700_000_000_000, 100)

    async def count_is(n: int) -> Any:
        async def check() -> bool:
            return await _cloud_count(cloud, "SELECT count(*) FROM readings") == n

        return check

    await eventually(await count_is(100), "first readings synced")
    await cloud.stop()
    await add_readings(db_path, device_id, 1_700_000_100_000, 3000)

    async def disconnected() -> bool:
        checks = await _healthz(agent)
        return checks["cloud"] == "disconnected" and int(checks["sync_records_queued"]) >= 3000

    await eventually(disconnected, "agent reports the cloud down with readings queued")
    await cloud.start()
    await eventually(await count_is(3100), "backlog drained after the outage")
    rows = await cloud.sql("SELECT count(DISTINCT ts) FROM readings")
    assert rows[0][0] == 3100

    async def drained() -> bool:
        checks = await _healthz(agent)
        return checks["cloud"] == "connected" and checks["sync_lag_seq"] == "0"

    await eventually(drained, "outbox trimmed to the ack")


async def _signed(agent_id: str, state_dir: Path, **fields: Any) -> tuple[bytes, str]:
    key = load_or_create_private_key(sync_key_path(state_dir))
    batch = Batch(agent_id=agent_id, sent_at=int(time.time() * 1000), records=(), **fields)
    return encode_batch(batch, key)


async def test_tampered_replayed_and_unknown_batches_are_refused(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    link = CloudLink.load(state)
    assert link is not None
    url = cloud.url + "/api/v1/sync/batches"
    body, signature = await _signed(link.agent_id, state, ranges=((0, 3),))

    async def post(data: bytes, sig: str, agent_id: str) -> tuple[int, Any]:
        headers = {AGENT_HEADER: agent_id, SIGNATURE_HEADER: sig}
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=data, headers=headers) as resp,
        ):
            return resp.status, await resp.json()

    status, ack = await post(body, signature, link.agent_id)
    assert status == 200 and ack["acked_seq"] == 3
    status, answer = await post(body, signature, link.agent_id)
    assert status == 409 and answer["error"]["code"] == "RESOURCE_EXISTS"
    tampered = bytearray(body)
    tampered[-5] ^= 0xFF
    fresh, fresh_sig = await _signed(link.agent_id, state)
    status, answer = await post(bytes(tampered), fresh_sig, link.agent_id)
    assert status == 401 and answer["success"] is False
    status, _ = await post(fresh, fresh_sig, str(uuid.uuid4()))
    assert status == 401
    stale_key = load_or_create_private_key(sync_key_path(state))
    old = Batch(agent_id=link.agent_id, sent_at=int(time.time() * 1000) - 3_600_000, records=())
    old_body, old_sig = encode_batch(old, stale_key)
    status, _ = await post(old_body, old_sig, link.agent_id)
    assert status == 409
    rows = await cloud.sql("SELECT acked_seq FROM agents")
    assert rows[0][0] == 3


async def test_cloud_users_log_in_offline_and_are_locked_out_after_the_next_sync(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    farm_id, worker_id = await _worker_on_a_synced_farm(cloud, agent)
    cloud_token = await cloud.login("worker@cloud.test")
    login = {"email": "worker@cloud.test", "password": CLOUD_PASSWORD}

    async def worker_can_log_in() -> bool:
        resp = await agent.client.post("/api/v1/login", json=login)
        return resp.status == 200

    await eventually(worker_can_log_in, "cloud user replicated to the agent")
    lan_token = (await (await agent.client.post("/api/v1/login", json=login)).json())[
        "access_token"
    ]

    # The cloud session reaches the agent with the next delta after the login (the worker
    # alone may have arrived with an earlier one).
    async def both_tokens_work() -> bool:
        for token in (lan_token, cloud_token):
            resp = await agent.client.get(f"/api/v1/farms/{farm_id}", headers=agent.auth(token))
            if resp.status != 200:
                return False
        return True

    await eventually(both_tokens_work, "the LAN and the cloud token accepted on the agent")

    # The cloud revokes the cloud session and suspends the account.
    await cloud.sql("UPDATE sessions SET revoked_at = now() WHERE user_id = $1", UUID(worker_id))
    await cloud.sql("UPDATE users SET status = 'suspended' WHERE id = $1", UUID(worker_id))

    async def locked_out() -> bool:
        statuses = []
        for token in (lan_token, cloud_token):
            resp = await agent.client.get(f"/api/v1/farms/{farm_id}", headers=agent.auth(token))
            statuses.append(resp.status)
        return statuses == [401, 401]

    await eventually(locked_out, "suspended user refused on the agent")
    resp = await agent.client.post("/api/v1/login", json=login)
    assert resp.status == 400


async def test_full_outbox_rolls_raw_readings_up_and_keeps_configuration(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC, outbox_max_bytes=20_000)
    farm_id, device_id = await _farm_with_device(agent)

    async def farm_in_cloud() -> bool:
        return await _cloud_count(cloud, "SELECT count(*) FROM farms") == 1

    await eventually(farm_in_cloud, "farm mirrored")
    await cloud.stop()
    resp = await agent.client.put(
        f"/api/v1/farms/{farm_id}", json={"name": "Renamed offline"}, headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    # 1 reading a second for 20 minutes: far over a 20 kB outbox.
    await add_readings(tmp_path / "state" / "agent.db", device_id, 1_700_000_040_000, 1200)

    async def rolled_up() -> bool:
        checks = await _healthz(agent)
        return int(checks["sync_rolled_up"]) > 0 and int(checks["sync_bytes_queued"]) <= 20_000

    await eventually(rolled_up, "raw readings rolled up under the cap")
    await cloud.start()

    async def synced() -> bool:
        return await _healthz(agent) == {} or (await _healthz(agent))["sync_lag_seq"] == "0"

    await eventually(synced, "outbox drained")
    rows = await cloud.sql("SELECT name FROM farms")
    assert rows[0][0] == "Renamed offline"
    raw = await _cloud_count(cloud, "SELECT count(*) FROM readings")
    rolled = await _cloud_count(
        cloud, "SELECT coalesce(sum(count), 0) FROM rollups WHERE resolution = '1m'"
    )
    assert rolled > 0
    assert raw + rolled == 1200


async def test_a_cloud_user_with_mfa_cannot_log_in_on_the_agent_with_the_password_alone(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    _, worker_id = await _worker_on_a_synced_farm(cloud, agent)
    login = {"email": "worker@cloud.test", "password": CLOUD_PASSWORD}

    async def status_of_login() -> int:
        return (await agent.client.post("/api/v1/login", json=login)).status

    async def can_log_in() -> bool:
        return await status_of_login() == 200

    await eventually(can_log_in, "cloud user replicated to the agent")
    # MFA turned on in the cloud (what /auth/mfa/confirm stores).
    await cloud.sql(
        "UPDATE users SET mfa_enabled = true, mfa_secret = '\\x00'::bytea WHERE id = $1",
        UUID(worker_id),
    )

    async def refused() -> bool:
        return await status_of_login() == 400

    await eventually(refused, "the password alone refused on the agent once MFA is on")
