"""Revocation latency benchmark (issue 16): how long a permission deleted in the cloud keeps
working on an idle paired agent. Target: refused within 10 s.

Runs a private PostgreSQL cluster, the cloud (``python -m cloud run``) and a paired agent
(``python -m agent run``, nothing to upload) as processes. Each trial grants a cloud user
read_write on the agent's farm, waits until the user's cloud token reads the farm on the agent,
deletes the permission through the cloud's API and times until the agent refuses that token.
The baseline, measured in the same run, is one idle sync exchange (an empty signed batch and its
answer): the latency is about one heartbeat plus that. The delete lands just after the poll that
brought the grant, so each trial measures the worst case, a whole heartbeat.

    .venv/bin/python -m bench.revocation [--trials N] [--heartbeat S]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from uuid import UUID

import aiohttp

from agent.sync.link import CloudLink, sync_key_path
from bench.measure import Run, percentile
from cloud.settings import CloudSettings
from protocol.keyfile import load_or_create_private_key
from protocol.sync import AGENT_HEADER, SIGNATURE_HEADER, Batch, encode_batch
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.e2e.helpers import eventually, paired_state
from tests.e2e.processes import CloudProcess, free_port, spawn_agent
from tests.support.cloud_database import (
    APP_PASSWORD,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    TEMPLATE,
    CloudDatabase,
    build_template,
)
from tests.support.postgres import PostgresCluster

TARGET_S = 10.0


async def _json(
    session: aiohttp.ClientSession, method: str, url: str, token: str | None = None, **kw: object
) -> tuple[int, dict[str, object]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.request(method, url, headers=headers, **kw) as resp:  # type: ignore[arg-type]
        body = await resp.json() if resp.content_type == "application/json" else {}
        return resp.status, body


async def _login(session: aiohttp.ClientSession, url: str, email: str, password: str) -> str:
    status, body = await _json(
        session, "POST", url + "/api/v1/login", json={"email": email, "password": password}
    )
    assert status == 200, body
    return str(body["access_token"])


async def _exchange_s(session: aiohttp.ClientSession, cloud_url: str, state: Path) -> float:
    """One idle sync exchange, as the agent makes it every heartbeat."""
    link = CloudLink.load(state)
    assert link is not None
    key = load_or_create_private_key(sync_key_path(state))
    batch = Batch(agent_id=link.agent_id, sent_at=int(time.time() * 1000), records=())
    body, signature = encode_batch(batch, key)
    headers = {AGENT_HEADER: link.agent_id, SIGNATURE_HEADER: signature}
    started = time.perf_counter()
    async with session.post(cloud_url + "/api/v1/sync/batches", data=body, headers=headers) as r:
        await r.read()
        assert r.status == 200, r.status
    return time.perf_counter() - started


async def run(trials: int, heartbeat: float) -> None:
    """Set everything up, measure, print."""
    cluster = PostgresCluster.start()
    try:
        await build_template(cluster)
        with tempfile.TemporaryDirectory() as tmp:
            await _measure(cluster, Path(tmp), trials, heartbeat)
    finally:
        cluster.stop()


async def _measure(cluster: PostgresCluster, tmp: Path, trials: int, heartbeat: float) -> None:
    db = CloudDatabase(
        name=TEMPLATE,
        superuser_dsn=cluster.dsn(TEMPLATE),
        owner_dsn=cluster.dsn(TEMPLATE, OWNER_ROLE, OWNER_PASSWORD),
        app_dsn=cluster.dsn(TEMPLATE, "farm_app", APP_PASSWORD),
        system_dsn=cluster.dsn(TEMPLATE, "farm_sync", SYSTEM_PASSWORD),
        cluster=cluster,
    )
    settings = CloudSettings(
        owner_dsn=db.owner_dsn,
        app_dsn=db.app_dsn,
        sync_dsn=db.system_dsn,
        signing_key_path=tmp / "cloud_key.pem",
    )
    cloud = CloudProcess(settings, db, free_port(), log=tmp / "cloud.log")
    await cloud.start()
    state = tmp / "state"
    try:
        await paired_state(cloud, state)
        agent = await spawn_agent(state, tmp / "agent.log", FARM_SYNC_HEARTBEAT_S=str(heartbeat))
        try:
            async with aiohttp.ClientSession() as session:
                latencies, exchanges = await _trials(session, cloud, agent.url, state, trials)
        finally:
            agent.stop()
    finally:
        await cloud.stop()
    _report(latencies, exchanges, heartbeat)


async def _trials(
    session: aiohttp.ClientSession, cloud: CloudProcess, agent_url: str, state: Path, trials: int
) -> tuple[list[float], list[float]]:
    admin = await _login(session, agent_url, ADMIN_EMAIL, ADMIN_PASSWORD)
    status, farm = await _json(
        session, "POST", agent_url + "/api/v1/farms/", admin, json={"name": "Bench"}
    )
    assert status == 201, farm
    farm_id = str(farm["id"])

    async def mirrored() -> bool:
        return bool(await cloud.sql("SELECT 1 FROM farms WHERE id = $1", UUID(farm_id)))

    await eventually(mirrored, "farm mirrored", limit_s=60)
    root = await cloud.login("root@cloud.test")
    grower_id = await cloud.add_user("operator", "grower@cloud.test")
    farm_url = f"{agent_url}/api/v1/farms/{farm_id}"
    latencies = []
    for _ in range(trials):
        status, grant = await _json(
            session,
            "POST",
            cloud.url + "/api/v1/permissions/",
            root,
            json={"user_id": grower_id, "farm_id": farm_id, "permission_type": "read_write"},
        )
        assert status == 201, grant
        token = await cloud.login("grower@cloud.test")

        async def works(token: str = token) -> bool:
            return (await _json(session, "GET", farm_url, token))[0] == 200

        await eventually(works, "the grant works on the agent", limit_s=60)
        status, _ = await _json(
            session, "DELETE", f"{cloud.url}/api/v1/permissions/{grant['id']}", root
        )
        assert status == 204
        started = time.perf_counter()
        latencies.append(await _until_refused(session, farm_url, token) - started)
    exchanges = [await _exchange_s(session, cloud.url, state) for _ in range(10)]
    return latencies, exchanges


async def _until_refused(session: aiohttp.ClientSession, url: str, token: str) -> float:
    """Poll every 20 ms; the moment the agent no longer answers 200."""
    while True:
        if (await _json(session, "GET", url, token))[0] != 200:
            return time.perf_counter()
        await asyncio.sleep(0.02)


def _report(latencies: list[float], exchanges: list[float], heartbeat: float) -> None:
    latencies.sort()
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    exchange = percentile(exchanges, 50)
    print(f"trials: {len(latencies)}  heartbeat: {heartbeat:.1f} s")
    print(
        f"revocation on the agent: p50 {p50:.2f} s  p95 {p95:.2f} s  max {latencies[-1]:.2f} s"
        f"  (target <= {TARGET_S:.0f} s: {'met' if latencies[-1] <= TARGET_S else 'MISSED'})"
    )
    print(f"baseline, one idle sync exchange: p50 {exchange * 1000:.1f} ms")
    print(f"ratio revocation p50 / (heartbeat + exchange): {p50 / (heartbeat + exchange):.2f}")


def main() -> None:
    """Command line entry."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--heartbeat", type=float, default=4.0, help="FARM_SYNC_HEARTBEAT_S")
    args = parser.parse_args()
    with Run().reported():
        asyncio.run(run(args.trials, args.heartbeat))


if __name__ == "__main__":
    main()
