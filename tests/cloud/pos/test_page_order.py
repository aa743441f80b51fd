"""Two pages of a job written at once, on two connections: the second page's position is
recorded only after the first page's transaction has ended. When the first commits, both count;
when its process dies before it commits, the second is rolled back too, so the job resumes
exactly after its last committed page, nothing skipped."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from uuid import UUID, uuid4

import asyncpg
import pytest

from cloud.store import pos_jobs, pos_mirror
from cloud.store.db import Database, DatabaseUnavailable
from cloud.store.pos_mirror import MirrorRow
from tests.cloud.api.conftest import Conn
from tests.cloud.conftest import CloudDatabase, connected
from tests.cloud.pos.conftest import wait_for
from tests.cloud.seed import add_user

LEASE_S = 60.0


def _rows(*ids: str) -> list[MirrorRow]:
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    return [MirrorRow(i, "L001", moment, moment, {"id": i}) for i in ids]


async def _claimed_job(system: Conn, worker: UUID) -> tuple[UUID, UUID, UUID]:
    owner = await add_user(system, "owner@example.com", "farm_manager")
    config = await system.fetchval(
        "INSERT INTO pos_configs (owner_id, name, environment, access_token)"
        " VALUES ($1, 'Shop', 'sandbox', '\\x00') RETURNING id",
        owner,
    )
    job, _ = await pos_jobs.enqueue_job(system, config, owner, "orders", ["orders"], "manual")
    claimed = await pos_jobs.claim_job(system, worker, LEASE_S)
    assert claimed is not None and claimed["id"] == job["id"]
    return job["id"], config, owner


class _Page:
    """One page's transaction on the service's pool: its turn taken and its rows written, then
    (once ``go`` is set) the wait for the page before and its position recorded."""

    def __init__(self, database: Database, job: UUID, config: UUID, owner: UUID) -> None:
        self.database, self.job, self.config, self.owner = database, job, config, owner
        self.wrote, self.go = asyncio.Event(), asyncio.Event()
        self.pid = 0

    async def write(self, worker: UUID, pages_before: int, ids: tuple[str, ...]) -> bool:
        try:
            async with self.database.as_system() as conn:
                self.pid = conn.get_server_pid()
                await pos_jobs.take_page_turn(conn, self.job, pages_before)
                rows = _rows(*ids)
                await pos_mirror.upsert_objects(conn, self.config, self.owner, "orders", rows)
                self.wrote.set()
                await self.go.wait()
                await pos_jobs.wait_page_turn(conn, self.job, pages_before)
                if not await pos_jobs.record_page(
                    conn,
                    self.job,
                    worker,
                    LEASE_S,
                    step=0,
                    position={"chunk": 0, "cursor": f"after-{pages_before + 1}"},
                    since=None,
                    step_high_water=None,
                    resource="orders",
                    records=len(ids),
                    pages_before=pages_before,
                ):
                    raise _RolledBack()
        except _RolledBack:
            return False
        return True


class _RolledBack(Exception):
    pass


async def _second_page_waits(cloud_db: CloudDatabase) -> None:
    async with connected(cloud_db.superuser_dsn) as su:

        async def waiting() -> bool:
            count: int = await su.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            return count == 1

        await wait_for(waiting, "the second page waiting for the first")


async def _two_pages_in_flight(
    cloud_db: CloudDatabase, database: Database, system: Conn
) -> tuple[UUID, _Page, asyncio.Task[bool], asyncio.Task[bool]]:
    """A claimed job whose first page has written its rows and holds before its commit, and
    whose second page waits for it to record its position: the job, the first page, and both
    writes."""
    worker = uuid4()
    job, config, owner = await _claimed_job(system, worker)
    first, second = _Page(database, job, config, owner), _Page(database, job, config, owner)
    writing_first = asyncio.create_task(first.write(worker, 0, ("O1", "O2")))
    await first.wrote.wait()
    second.go.set()
    writing_second = asyncio.create_task(second.write(worker, 1, ("O3", "O4")))
    await _second_page_waits(cloud_db)
    return job, first, writing_first, writing_second


async def test_the_second_page_counts_once_the_first_commits(
    cloud_db: CloudDatabase, database: Database, system: Conn
) -> None:
    job, first, writing_first, writing_second = await _two_pages_in_flight(
        cloud_db, database, system
    )
    assert not writing_second.done()
    first.go.set()
    assert await writing_first
    assert await writing_second
    row = await system.fetchrow("SELECT pages, records, position FROM pos_jobs WHERE id = $1", job)
    assert (row["pages"], row["records"]) == (2, 4)
    assert json.loads(row["position"])["cursor"] == "after-2"
    assert await system.fetchval("SELECT count(*) FROM pos_objects") == 4


async def test_a_first_page_killed_before_its_commit_rolls_the_second_back(
    cloud_db: CloudDatabase, database: Database, system: Conn
) -> None:
    job, first, writing_first, writing_second = await _two_pages_in_flight(
        cloud_db, database, system
    )
    # The process writing the first page dies (kill -9): its connection drops uncommitted.
    async with connected(cloud_db.superuser_dsn) as su:
        assert await su.fetchval("SELECT pg_terminate_backend($1)", first.pid)
    first.go.set()
    with pytest.raises(
        (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, DatabaseUnavailable)
    ):
        await writing_first
    assert not await writing_second
    row = await system.fetchrow("SELECT pages, records, position FROM pos_jobs WHERE id = $1", job)
    # Resumes from the start: the second page's cursor was never recorded, nothing skipped.
    assert (row["pages"], row["records"], row["position"]) == (0, 0, None)
    assert await system.fetchval("SELECT count(*) FROM pos_objects") == 0
    # A page of a worker that lost the job is fenced off, whatever its turn.
    assert not await pos_jobs.record_page(
        system,
        job,
        uuid4(),
        LEASE_S,
        step=0,
        position=None,
        since=None,
        step_high_water=None,
        resource="orders",
        records=0,
        pages_before=0,
    )
