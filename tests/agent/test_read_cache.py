"""The read cache: one query however many requests miss at once, and never a value older than the
last commit."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.store.cache import GenerationCache
from agent.store.db import Database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "agent.db")
    await database.open()
    yield database
    await database.close()


async def _farm_count(db: Database) -> int:
    return int(await db.fetch_value("SELECT count(*) FROM farms"))


async def test_concurrent_misses_share_one_load(db: Database) -> None:
    cache: GenerationCache[str, int] = GenerationCache(db)
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        await asyncio.sleep(0.01)  # hold the load open while the others arrive
        return await _farm_count(db)

    results = await asyncio.gather(*(cache.get_or_load("farms", load) for _ in range(20)))
    assert results == [0] * 20 and loads == 1


async def test_a_commit_ends_the_cached_value(db: Database) -> None:
    cache: GenerationCache[str, int] = GenerationCache(db)
    assert await cache.get_or_load("farms", lambda: _farm_count(db)) == 0
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO farms (id, name, status, created_at, updated_at)"
            " VALUES ('f1', 'North', 'active', 'now', 'now')"
        )
    assert await cache.get_or_load("farms", lambda: _farm_count(db)) == 1


async def test_a_failed_load_fails_its_waiters_and_is_not_cached(db: Database) -> None:
    cache: GenerationCache[str, int] = GenerationCache(db)

    async def broken() -> int:
        await asyncio.sleep(0.01)
        raise RuntimeError("disk on fire")

    results = await asyncio.gather(
        *(cache.get_or_load("farms", broken) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    assert await cache.get_or_load("farms", lambda: _farm_count(db)) == 0


async def test_hot_writes_keep_cached_values_and_other_writes_end_them(db: Database) -> None:
    cache: GenerationCache[str, int] = GenerationCache(db)
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        return await _farm_count(db)

    def stamp(conn: sqlite3.Connection) -> None:  # what a reading batch touches: the outbox
        conn.execute("UPDATE outbox_stats SET rejected = rejected WHERE id = 1")

    def add_farm(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO farms (id, name, status, created_at, updated_at)"
            " VALUES ('f1', 'North', 'active', 'now', 'now')"
        )

    assert await cache.get_or_load("farms", load) == 0
    await db.write(stamp, hot=True)
    assert await cache.get_or_load("farms", load) == 0 and loads == 1
    # A hot write committed together with one that is not: the cache learns the change.
    await asyncio.gather(db.write(stamp, hot=True), db.write(add_farm))
    assert await cache.get_or_load("farms", load) == 1 and loads == 2
