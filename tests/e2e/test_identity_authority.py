"""The cloud is the only identity authority of a paired farm (issue 16).

The agent and the cloud run as processes, as an operator runs them, with default sync pacing: an
idle agent asks for a newer identity delta every heartbeat, and what the cloud revokes stops
working on the agent without anything to upload. Revocations hold across later exchanges: the
agent never sends its replica back, and the cloud accepts no identity from agents.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import UUID

import aiohttp
import asyncpg
import pytest

from agent.sync.link import CloudLink, sync_key_path
from cloud.settings import CloudSettings
from protocol.keyfile import load_or_create_private_key
from protocol.sync import (
    AGENT_HEADER,
    SIGNATURE_HEADER,
    Ack,
    Batch,
    Lane,
    Record,
    encode_batch,
)
from tests.cloud.conftest import CloudDatabase
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.e2e.conftest import CLOUD_PASSWORD, LiveCloud
from tests.e2e.helpers import eventually, paired_state
from tests.e2e.processes import AgentProcess, CloudProcess, free_port, spawn_agent

GROWER = "grower@cloud.test"


@pytest.fixture
async def cloud_process(cloud_db: CloudDatabase, tmp_path: Path) -> AsyncIterator[CloudProcess]:
    """``python -m cloud run`` on a fresh database, owned by the migrating role as
    docs/cloud-rls.md sets one up (the fixture's copy is owned by the superuser who made it)."""
    await _sql(cloud_db.superuser_dsn, f'ALTER DATABASE "{cloud_db.name}" OWNER TO farm_owner')
    settings = CloudSettings(
        owner_dsn=cloud_db.owner_dsn,
        app_dsn=cloud_db.app_dsn,
        sync_dsn=cloud_db.system_dsn,
        signing_key_path=tmp_path / "cloud_key.pem",
    )
    live = CloudProcess(settings, cloud_db, free_port(), log=tmp_path / "cloud.log")
    await live.start()
    try:
        yield live
    finally:
        await live.stop()


async def _sql(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(statement, timeout=10)
    finally:
        await conn.close(timeout=10)


async def _call(
    url: str, method: str, path: str, token: str | None = None, **kwargs: Any
) -> tuple[int, Any]:
    headers = kwargs.pop("headers", {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url + path, headers=headers, **kwargs) as resp,
    ):
        body = await resp.json() if resp.content_type == "application/json" else None
        return resp.status, body


async def _login(url: str, email: str, password: str) -> str:
    status, body = await _call(
        url, "POST", "/api/v1/login", json={"email": email, "password": password}
    )
    assert status == 200, body
    return str(body["access_token"])


@pytest.fixture
async def site(cloud_process: CloudProcess, tmp_path: Path) -> AsyncIterator[Site]:
    """A paired agent process with a farm mirrored in the cloud, and a cloud grower."""
    state = tmp_path / "state"
    await paired_state(cloud_process, state)
    agent = await spawn_agent(state, tmp_path / "agent.log")
    try:
        admin = await _login(agent.url, ADMIN_EMAIL, ADMIN_PASSWORD)
        status, farm = await _call(agent.url, "POST", "/api/v1/farms/", admin, json={"name": "N"})
        assert status == 201, farm

        async def mirrored() -> bool:
            rows = await cloud_process.sql("SELECT 1 FROM farms WHERE id = $1", UUID(farm["id"]))
            return bool(rows)

        await eventually(mirrored, "farm mirrored in the cloud")
        grower_id = await cloud_process.add_user("farm_manager", GROWER)
        root = await cloud_process.login("root@cloud.test")
        yield Site(cloud_process, agent, state, farm["id"], grower_id, root)
    finally:
        agent.stop()


class Site:
    """The paired farm of a test."""

    def __init__(
        self,
        cloud: CloudProcess,
        agent: AgentProcess,
        state: Path,
        farm_id: str,
        grower_id: str,
        root_token: str,
    ) -> None:
        self.cloud, self.agent, self.state = cloud, agent, state
        self.farm_id, self.grower_id, self.root = farm_id, grower_id, root_token

    async def on_cloud(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """A cloud admin's request."""
        return await _call(self.cloud.url, method, path, self.root, **kwargs)

    async def grant(self, permission_type: str) -> str:
        """Grant the grower access to the farm in the cloud; the permission's id."""
        status, body = await self.on_cloud(
            "POST",
            "/api/v1/permissions/",
            json={
                "user_id": self.grower_id,
                "farm_id": self.farm_id,
                "permission_type": permission_type,
            },
        )
        assert status == 201, body
        return str(body["id"])

    async def farm_status(self, **credentials: str) -> int:
        """GET the farm on the agent with a token or an API key."""
        headers = {"X-API-Key": credentials["key"]} if "key" in credentials else {}
        status, _ = await _call(
            self.agent.url,
            "GET",
            f"/api/v1/farms/{self.farm_id}",
            credentials.get("token"),
            headers=headers,
        )
        return status

    async def rename_status(self, token: str) -> int:
        """PUT the farm's name on the agent (a write)."""
        status, _ = await _call(
            self.agent.url,
            "PUT",
            f"/api/v1/farms/{self.farm_id}",
            token,
            json={"name": f"renamed {uuid.uuid4().hex[:6]}"},
        )
        return status

    async def grower_on_agent(self) -> str:
        """Wait until the grower can log in on the LAN; their agent token."""

        # Polled as the local admin: failed logins would lock the grower's account.
        admin = await _login(self.agent.url, ADMIN_EMAIL, ADMIN_PASSWORD)

        async def replicated() -> bool:
            status, _ = await _call(self.agent.url, "GET", f"/api/v1/users/{self.grower_id}", admin)
            return status == 200

        await eventually(replicated, "grower replicated to the agent")
        return await _login(self.agent.url, GROWER, CLOUD_PASSWORD)

    async def exchanges(self) -> int:
        """Sync exchanges the cloud has answered for the agent so far."""
        rows = await self.cloud.sql("SELECT count(*) FROM sync_batches")
        return int(rows[0][0])


async def test_a_permission_deleted_in_the_cloud_stays_deleted_and_locks_the_grower_out(
    site: Site,
) -> None:
    grant_id = await site.grant("read_write")
    lan = await site.grower_on_agent()
    cloud_token = await site.cloud.login(GROWER)

    async def granted() -> bool:
        return await site.farm_status(token=lan) == 200 and (
            await site.farm_status(token=cloud_token) == 200
        )

    await eventually(granted, "the grant works on the agent")

    status, _ = await site.on_cloud("DELETE", f"/api/v1/permissions/{grant_id}")
    assert status == 204

    # Without a grant on the agent's farms the grower is no longer one of its users: every
    # token of theirs is refused outright.
    async def refused() -> bool:
        return await site.farm_status(token=lan) == 401 and (
            await site.farm_status(token=cloud_token) == 401
        )

    await eventually(refused, "the grower refused on the agent for the revoked farm")
    # Three more exchanges: the grant never comes back to the cloud, nor to the agent.
    seen = await site.exchanges()

    async def three_more() -> bool:
        return await site.exchanges() >= seen + 3

    await eventually(three_more, "three more sync exchanges")
    rows = await site.cloud.sql("SELECT id FROM permissions WHERE id = $1", UUID(grant_id))
    assert rows == []
    assert await site.farm_status(token=lan) == 401
    assert await site.farm_status(token=cloud_token) == 401


async def test_a_downgrade_to_read_only_refuses_writes_and_allows_reads(site: Site) -> None:
    await site.grant("read_write")
    lan = await site.grower_on_agent()

    async def writable() -> bool:
        return await site.rename_status(lan) == 200

    await eventually(writable, "the grower may write the farm on the agent")
    status, body = await site.on_cloud(
        "POST",
        "/api/v1/users/permissions",
        json={
            "user_id": site.grower_id,
            "permissions": [{"farm_id": site.farm_id, "permission_type": "read_only"}],
        },
    )
    assert status == 200, body

    async def read_only() -> bool:
        return await site.rename_status(lan) == 403

    await eventually(read_only, "writes refused after the downgrade")
    assert await site.farm_status(token=lan) == 200


async def test_a_suspended_user_and_a_revoked_api_key_stop_working_on_the_agent(
    site: Site,
) -> None:
    await site.grant("read_only")
    lan = await site.grower_on_agent()
    status, created = await site.on_cloud(
        "POST", "/api/v1/api-keys", json={"user_id": site.grower_id, "name": "wall display"}
    )
    assert status == 201, created
    key = created["key"]

    async def key_works() -> bool:
        return await site.farm_status(key=key) == 200

    await eventually(key_works, "the cloud's API key works on the agent")
    status, _ = await site.on_cloud("DELETE", f"/api/v1/api-keys/{created['id']}")
    assert status == 204

    async def key_refused() -> bool:
        return await site.farm_status(key=key) == 401

    await eventually(key_refused, "the revoked API key refused on the agent")
    assert await site.farm_status(token=lan) == 200

    status, body = await site.on_cloud(
        "PUT", f"/api/v1/users/{site.grower_id}", json={"status": "suspended"}
    )
    assert status == 200, body

    async def suspended() -> bool:
        return await site.farm_status(token=lan) == 401

    await eventually(suspended, "the suspended grower refused on the agent")
    status, _ = await _call(
        site.agent.url, "POST", "/api/v1/login", json={"email": GROWER, "password": CLOUD_PASSWORD}
    )
    assert status == 400


async def test_a_local_admins_grant_on_a_paired_agent_is_refused_with_a_pointer_to_the_cloud(
    site: Site,
) -> None:
    await site.grant("read_only")
    lan = await site.grower_on_agent()
    admin = await _login(site.agent.url, ADMIN_EMAIL, ADMIN_PASSWORD)
    grant = {"farm_id": site.farm_id, "permission_type": "read_write"}
    for path, body in (
        ("/api/v1/permissions/", {"user_id": site.grower_id, **grant}),
        ("/api/v1/users/permissions", {"user_id": site.grower_id, "permissions": [grant]}),
    ):
        status, answer = await _call(site.agent.url, "POST", path, admin, json=body)
        assert status == 409, answer
        assert answer["error"]["code"] == "MANAGED_BY_CLOUD"
        assert "make this change in the cloud" in answer["error"]["message"]
    # Nothing changed on either side, and nothing does after more exchanges.
    seen = await site.exchanges()

    async def two_more() -> bool:
        return await site.exchanges() >= seen + 2

    await eventually(two_more, "two more sync exchanges")
    rows = await site.cloud.sql(
        "SELECT permission_type FROM permissions WHERE user_id = $1", UUID(site.grower_id)
    )
    assert [r[0] for r in rows] == ["read_only"]
    assert await site.rename_status(lan) == 403


async def _post_batch(cloud: LiveCloud, state: Path, batch: Batch) -> tuple[int, Any]:
    key = load_or_create_private_key(sync_key_path(state))
    body, signature = encode_batch(batch, key)
    return await _call(
        cloud.url,
        "POST",
        "/api/v1/sync/batches",
        data=body,
        headers={AGENT_HEADER: batch.agent_id, SIGNATURE_HEADER: signature},
    )


def _record(seq: int, kind: str, key: str, data: dict[str, Any]) -> Record:
    return Record(seq=seq, lane=Lane.PRIORITY, kind=kind, op="upsert", key=key, data=data)


async def test_a_signed_batch_carrying_identity_has_those_records_refused_and_the_rest_applied(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    link = CloudLink.load(state)
    assert link is not None
    intruder = await cloud.add_user("user", "intruder@cloud.test")
    farm_id = str(uuid.uuid4())
    stamp = "2024-01-01T00:00:00.000Z"
    farm = {
        "id": farm_id,
        "name": "Batch farm",
        "description": "",
        "location": "",
        "status": "active",
        "created_by": intruder,  # not a user of this agent: the owner becomes the creator
        "created_at": stamp,
        "updated_at": stamp,
    }
    grant = {
        "id": str(uuid.uuid4()),
        "user_id": intruder,
        "farm_id": farm_id,
        "permission_type": "read_write",
        "granted_at": stamp,
    }
    batch = Batch(
        agent_id=link.agent_id,
        sent_at=int(time.time() * 1000),
        records=(
            _record(1, "farms", farm_id, farm),
            _record(2, "permissions", grant["id"], grant),
            _record(3, "users", intruder, {"id": intruder, "role": "admin"}),
            _record(4, "sessions", str(uuid.uuid4()), {}),
            _record(5, "api_keys", str(uuid.uuid4()), {}),
            _record(6, "no_such_kind", "x", {}),
        ),
        ranges=((0, 6),),
    )
    permissions_before = await cloud.sql("SELECT id, user_id, farm_id FROM permissions")
    status, body = await _post_batch(cloud, state, batch)
    assert status == 200, body
    ack = Ack.model_validate(body)
    assert ack.acked_seq == 6
    assert ack.rejected == 5
    assert [(r.seq, r.kind) for r in ack.refused] == [
        (2, "permissions"),
        (3, "users"),
        (4, "sessions"),
        (5, "api_keys"),
        (6, "no_such_kind"),
    ]
    assert {r.reason for r in ack.refused[:4]} == {"identity flows from the cloud only"}
    assert ack.refused[4].reason == "unknown record kind"
    letters = await cloud.sql("SELECT seq, kind FROM sync_dead_letters ORDER BY seq")
    assert [tuple(r) for r in letters] == [(r.seq, r.kind) for r in ack.refused]
    # The farm applied; nothing of the identity did.
    owner = await cloud.sql("SELECT user_id FROM farms WHERE id = $1", UUID(farm_id))
    assert str(owner[0][0]) != intruder
    # The only new grant is the one the cloud makes for a farm's creator (the owner here).
    permissions_after = await cloud.sql("SELECT id, user_id, farm_id FROM permissions")
    new_grants = [tuple(r)[1:] for r in permissions_after if r not in permissions_before]
    assert new_grants == [(owner[0][0], UUID(farm_id))]
    assert all(r in permissions_after for r in permissions_before)
    roles = await cloud.sql("SELECT role FROM users WHERE id = $1", UUID(intruder))
    assert roles[0][0] == "user"


async def test_the_cloud_sends_a_delta_only_when_its_identity_version_moved(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    owner_id, _ = await paired_state(cloud, state)
    link = CloudLink.load(state)
    assert link is not None

    async def ack_for(held: int) -> Ack:
        batch = Batch(
            agent_id=link.agent_id,
            sent_at=int(time.time() * 1000),
            records=(),
            identity_version=held,
        )
        status, body = await _post_batch(cloud, state, batch)
        assert status == 200, body
        return Ack.model_validate(body)

    first = await ack_for(0)
    assert first.identity is not None and first.identity.version > 0
    held = first.identity.version
    assert (await ack_for(held)).identity is None
    await cloud.sql("UPDATE users SET status = 'suspended' WHERE id = $1", UUID(owner_id))
    moved = await ack_for(held)
    assert moved.identity is not None and moved.identity.version > held
    suspended = [u.status for u in moved.identity.users if u.id == owner_id]
    assert suspended == ["suspended"]
