"""Never two jobs pulling the same resource of one configuration at once, across processes: a
scheduled 'all' job queued while a manual 'orders' job runs waits, queued, until the orders are
pulled; the database refuses an overlapping claim whatever the code (issue 24)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import pytest

from cloud.services.pos.jobs import STEPS
from cloud.store import pos_jobs
from tests.cloud.conftest import CloudDatabase, connected
from tests.cloud.pos.conftest import FakeProvider, config_body
from tests.cloud.seed import add_user

LEASE_S = 60.0


async def _config(
    pos_cloud: Callable[..., Awaitable[Any]], fake: FakeProvider, system: Any, password_hash: str
) -> tuple[UUID, UUID]:
    cloud = await pos_cloud(pos_job_workers=0)  # the test's two connections are the workers
    owner = await add_user(system, "sam@example.com", "farm_manager")
    await system.execute("UPDATE users SET password_hash = $1", password_hash)
    token = await cloud.login("sam@example.com")
    resp = await cloud.client.post(
        "/api/v1/pos/configs",
        json=config_body(fake),
        headers={"Authorization": f"Bearer {token}"},
    )
    assert resp.status == 201, await resp.text()
    return UUID((await resp.json())["id"]), owner


async def _queue(conn: Any, config: UUID, owner: UUID, kind: str, trigger: str) -> UUID:
    async with conn.transaction():
        row, _ = await pos_jobs.enqueue_job(conn, config, owner, kind, list(STEPS[kind]), trigger)
    job_id: UUID = row["id"]
    return job_id


async def _claim(conn: Any, worker: UUID) -> UUID | None:
    async with conn.transaction():
        row = await pos_jobs.claim_job(conn, worker, LEASE_S)
    return None if row is None else row["id"]


async def test_a_scheduled_all_waits_for_a_running_orders_job_in_another_process(
    pos_cloud: Any, fake: FakeProvider, system: Any, password_hash: str, cloud_db: CloudDatabase
) -> None:
    config, owner = await _config(pos_cloud, fake, system, password_hash)
    one, two = uuid4(), uuid4()  # two processes, each with its own connection
    async with connected(cloud_db.system_dsn) as first, connected(cloud_db.system_dsn) as second:
        orders = await _queue(first, config, owner, "orders", "manual")
        assert await _claim(first, one) == orders
        everything = await _queue(second, config, owner, "all", "schedule")
        assert await _claim(second, two) is None  # it shares locations and orders: it waits
        customers = await _queue(second, config, owner, "customers", "manual")
        assert await _claim(second, two) == customers  # no overlap with the orders job
        # Whatever the code does, the database refuses to run it beside them.
        with pytest.raises(asyncpg.ExclusionViolationError):
            await second.execute(
                "UPDATE pos_jobs SET state = 'running', lease_owner = $2,"
                " lease_until = now() + interval '1 minute' WHERE id = $1",
                everything,
                two,
            )
        for job, worker in ((orders, one), (customers, two)):
            async with first.transaction():
                assert await pos_jobs.finish_job(first, job, worker, error=None)
        assert await _claim(second, two) == everything


async def test_two_processes_claiming_overlapping_jobs_at_once_run_one(
    pos_cloud: Any, fake: FakeProvider, system: Any, password_hash: str, cloud_db: CloudDatabase
) -> None:
    config, owner = await _config(pos_cloud, fake, system, password_hash)
    async with connected(cloud_db.system_dsn) as first, connected(cloud_db.system_dsn) as second:
        await _queue(first, config, owner, "orders", "manual")
        await _queue(first, config, owner, "all", "schedule")
        for _ in range(5):  # the claims race; whichever wins, the other gets nothing
            claimed = await asyncio.gather(_claim(first, uuid4()), _claim(second, uuid4()))
            assert len([job for job in claimed if job is not None]) == 1, claimed
            await first.execute(
                "UPDATE pos_jobs SET state = 'queued', lease_owner = NULL, lease_until = NULL"
            )
