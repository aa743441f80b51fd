"""Two cloud apps on one database stand for two farm-cloud processes behind a balancer: what
one counts or decides, the other sees (docs/scaling.md). The same with real processes, a
PostgreSQL restart and kill -9 is tests/e2e/test_cloud_fleet.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import asyncpg

from cloud.store import jobs
from cloud.store.db import Database
from tests.cloud.api.conftest import Cloud, Conn, World, assert_error
from tests.cloud.conftest import CloudDatabase
from tests.support.sim_agent import BATCHES_PATH, SimAgent


async def test_anonymous_quota_of_an_address_is_shared_by_every_process(
    make_cloud: Callable[..., Awaitable[Cloud]],
) -> None:
    one = await make_cloud(rate_limit_per_address=4)
    two = await make_cloud(rate_limit_per_address=4)
    remaining = []
    for cloud in (one, two, one, two):
        resp = await cloud.client.get("/api/v1/farms")
        assert resp.status == 401
        remaining.append(int(resp.headers["X-RateLimit-Remaining"]))
    assert remaining == [3, 2, 1, 0]
    for cloud in (one, two):
        resp = await cloud.client.get("/api/v1/farms")
        assert resp.status == 429
        assert_error(await resp.json(), "RATE_LIMITED")
        assert int(resp.headers["Retry-After"]) >= 1


async def test_a_users_quota_is_shared_by_every_process(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World
) -> None:
    one = await make_cloud(rate_limit_per_user=5)
    two = await make_cloud(rate_limit_per_user=5)
    token = await one.login("alice@example.com")
    statuses = [(await cloud.get("/api/v1/farms", token))[0] for cloud in (one, two) * 3]
    assert statuses == [200] * 5 + [429]


async def test_health_checks_of_a_balancer_spend_no_quota(
    make_cloud: Callable[..., Awaitable[Cloud]],
) -> None:
    cloud = await make_cloud(rate_limit_per_address=2)
    for _ in range(5):
        assert (await cloud.client.get("/health")).status == 200
    resp = await cloud.client.get("/api/v1/farms")
    assert resp.headers["X-RateLimit-Remaining"] == "1"


async def test_each_period_of_a_job_runs_in_exactly_one_process(database: Database) -> None:
    async def claim(worker: str) -> bool:
        async with database.as_system() as conn:
            return await jobs.claim_run(conn, "retention", 3600, worker)

    claims = await asyncio.gather(*(claim(f"w{n}") for n in range(8)))
    assert sorted(claims) == [False] * 7 + [True]
    assert not await claim("late")
    async with database.as_system() as conn:
        assert await jobs.job_runs(conn, "retention") == 1


async def _paired(cloud: Cloud, world: World) -> SimAgent:
    admin = await cloud.login("admin@example.com")
    resp = await cloud.client.post(
        "/api/v1/agents",
        json={"name": "North", "owner_id": str(world.users["alice"])},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert resp.status == 201
    code = (await resp.json())["pairing_code"]
    base = str(cloud.client.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        agent = await SimAgent.pair(session, base, code)
        status, ack = await agent.post(session, base, agent.sign(agent.farm_records(3)))
    assert status == 200 and ack["acked_seq"] == 4
    return agent


async def _readings_of(system: Conn, agent: SimAgent) -> int:
    count: int = await system.fetchval(
        "SELECT count(*) FROM readings WHERE agent_id = $1::uuid", agent.agent_id
    )
    return count


async def _post(cloud: Cloud, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    resp = await cloud.client.post(BATCHES_PATH, data=body, headers=headers)
    return resp.status, await resp.json()


async def test_one_batch_racing_into_two_processes_is_applied_once(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn
) -> None:
    one = await make_cloud()
    two = await make_cloud()
    agent = await _paired(one, world)
    batch = agent.sign(agent.reading_records(1_700_000_000_000, 50, 10_000), readings=150)
    answers = await asyncio.gather(
        _post(one, batch.body, batch.headers()), _post(two, batch.body, batch.headers())
    )
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200, 409]  # the second is told it is a replay
    assert await _readings_of(system, agent) == 150


async def test_one_resent_record_racing_into_two_processes_is_applied_once(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn
) -> None:
    one = await make_cloud()
    two = await make_cloud()
    agent = await _paired(one, world)
    records = agent.reading_records(1_700_000_000_000, 40, 10_000)
    # The agent's retry after a lost answer: the same records in a freshly signed batch.
    first, second = agent.sign(records, 120), agent.sign(records, 120)
    answers = await asyncio.gather(
        _post(one, first.body, first.headers()), _post(two, second.body, second.headers())
    )
    assert [status for status, _ in answers] == [200, 200]
    assert {ack["acked_seq"] for _, ack in answers} == {records[-1].seq}
    assert await _readings_of(system, agent) == 120
    # The hourly rollups the read API answers a long range from counted each reading once.
    hourly = await system.fetchval(
        "SELECT sum(count) FROM reading_rollups WHERE resolution = '1h'"
        " AND device_id = ANY($1::uuid[])",
        agent.device_ids,
    )
    assert hourly == 120


async def test_a_dropped_database_connection_is_survived(
    cloud: Cloud, world: World, cloud_db: CloudDatabase
) -> None:
    token = await cloud.login("alice@example.com")
    assert (await cloud.get("/api/v1/farms", token))[0] == 200
    admin = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        ended = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = $1 AND usename IN ('farm_app', 'farm_sync')",
            cloud_db.name,
        )
    finally:
        await admin.close(timeout=10)
    assert ended >= 2
    for _ in range(50):  # every pooled connection is gone; each is replaced on its next use
        status, body = await cloud.get("/api/v1/farms", token)
        assert status in (200, 503), body
        if status == 503:
            assert_error(body, "SERVICE_UNAVAILABLE")
    assert (await cloud.get("/api/v1/farms", token))[0] == 200
