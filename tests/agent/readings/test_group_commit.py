"""Group commit: a reading commits once the previous commit is done, durably before fan-out."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from agent.services.readings.listeners import CommittedReading
from agent.services.readings.writer import IncomingReading, ReadingWriter
from agent.store.db import Database
from agent.store.readings import NewReading, ReadingStore, WriteOutcome
from tests.agent.readings.conftest import DAY, T0, Farm, count

WAIT = 10.0
LONG = 3600.0
"""An interval no test waits for: a reading that needs it to pass never arrives."""


class RecordingStore(ReadingStore):
    """A real store that records each batch and can hold the first commit open."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.batches: list[int] = []
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def write(self, readings: Sequence[NewReading]) -> WriteOutcome:
        self.batches.append(len(readings))
        self.writing.set()
        await self.release.wait()
        return await super().write(readings)


@contextlib.asynccontextmanager
async def running(store: ReadingStore, **options: Any) -> AsyncIterator[ReadingWriter]:
    """A started writer, stopped on exit."""
    writer = ReadingWriter(store, max_age_ms=10_000 * DAY, **options)
    await writer.start()
    try:
        yield writer
    finally:
        await writer.stop()


def reading(device: str, value: float, ts: int = T0) -> IncomingReading:
    """An incoming pH reading received at ``ts``."""
    return IncomingReading(device, "ph", "pH", value, received_ts=ts)


async def test_a_reading_commits_without_waiting_for_the_batch_interval(farm: Farm) -> None:
    async with running(farm.store, batch_interval=LONG, min_commit_interval=0) as writer:
        with writer.subscribe() as listener:
            writer.submit(reading(farm.sensor, 6.5))
            committed = await asyncio.wait_for(listener.get(), WAIT)
    assert committed.value == 6.5
    assert await count(farm.db, "readings") == 1


async def test_readings_queued_during_a_commit_go_together_into_the_next(farm: Farm) -> None:
    store = RecordingStore(farm.db)
    store.release.clear()
    async with running(store, batch_interval=LONG, min_commit_interval=0) as writer:
        writer.submit(reading(farm.sensor, 6.0, T0))
        await asyncio.wait_for(store.writing.wait(), WAIT)
        writer.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(1, 101))
        store.release.set()
        await writer.flush()
        assert store.batches == [1, 100]
        assert writer.stats.committed == 101 and writer.stats.commits == 2


async def test_the_commit_rate_bound_gathers_readings_into_one_commit(farm: Farm) -> None:
    store = RecordingStore(farm.db)
    async with running(store, batch_interval=LONG, min_commit_interval=LONG) as writer:
        with writer.subscribe() as listener:
            writer.submit(reading(farm.sensor, 6.0, T0))
            await asyncio.wait_for(listener.get(), WAIT)  # the first commit is not held back
            writer.submit(reading(farm.sensor, 6.1, T0 + 1))
            await asyncio.sleep(0.2)  # room for a premature commit, which must not happen
            writer.submit(reading(farm.sensor, 6.2, T0 + 2))
            assert store.batches == [1]
            await writer.flush()  # a flush commits now, whatever the bound
    assert store.batches == [1, 2]
    assert await count(farm.db, "readings") == 3


async def test_no_reading_waits_longer_than_the_batch_interval(farm: Farm) -> None:
    # The fsync bound (an hour) would hold the second reading; the batch interval caps the wait.
    async with running(farm.store, batch_interval=0.05, min_commit_interval=LONG) as writer:
        with writer.subscribe() as listener:
            writer.submit(reading(farm.sensor, 6.0, T0))
            await asyncio.wait_for(listener.get(), WAIT)
            writer.submit(reading(farm.sensor, 6.1, T0 + 1))
            second = await asyncio.wait_for(listener.get(), WAIT)
    assert second.value == 6.1


async def test_listeners_see_a_reading_only_once_it_is_on_disk(farm: Farm) -> None:
    on_disk_at_fan_out: list[int] = []

    def check(committed: CommittedReading) -> bool:
        # Runs inside the fan-out: a separate connection must already see the row.
        with contextlib.closing(sqlite3.connect(farm.db.path, timeout=30)) as conn:
            on_disk_at_fan_out.append(
                conn.execute(
                    "SELECT count(*) FROM readings WHERE ts = ?", (committed.ts,)
                ).fetchone()[0]
            )
        return True

    async with running(farm.store, batch_interval=LONG, min_commit_interval=0) as writer:
        with writer.subscribe(accept=check) as listener:
            writer.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(3))
            for _ in range(3):
                await asyncio.wait_for(listener.get(), WAIT)
    assert on_disk_at_fan_out == [1, 1, 1]


async def test_stop_commits_what_the_rate_bound_was_holding(farm: Farm) -> None:
    store = RecordingStore(farm.db)
    async with running(store, batch_interval=LONG, min_commit_interval=LONG) as writer:
        with writer.subscribe() as listener:
            writer.submit(reading(farm.sensor, 6.0, T0))
            await asyncio.wait_for(listener.get(), WAIT)
            writer.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(1, 50))
    assert store.batches == [1, 49]
    assert await count(farm.db, "readings") == 50


@pytest.mark.parametrize("interval", [0.0, 0.02])
async def test_a_flush_waits_for_everything_submitted_before_it(
    farm: Farm, interval: float
) -> None:
    async with running(farm.store, batch_interval=LONG, min_commit_interval=interval) as writer:
        for i in range(5):
            writer.submit_many(reading(farm.sensor, 6.0, T0 + i * 100 + j) for j in range(100))
            await writer.flush()
            assert await count(farm.db, "readings") == (i + 1) * 100
