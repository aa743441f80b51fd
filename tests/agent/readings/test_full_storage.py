"""A full store (the database at its size cap, as a full card refuses writes): readings wait for
room, never get lost, and are stored exactly once when room comes back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agent.services.readings.writer import IncomingReading, ReadingWriter
from agent.store.db import Database
from tests.agent.readings.conftest import DAY, T0, Farm, count

READINGS = 3000


async def eventually(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Wait until ``condition()`` holds (the writer's retries have no event to wait on)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def fill(db: Database, pages: int = 4) -> None:
    """Cap the database a few pages over its present size: the next writes find it full."""
    size = await db.size()
    await db.cap((size.pages + pages) * size.page_size)


async def test_readings_refused_for_lack_of_space_wait_and_are_stored_once(farm: Farm) -> None:
    writer = ReadingWriter(farm.store, batch_interval=0.01, max_batch=500, max_age_ms=10_000 * DAY)
    await writer.start()
    try:
        await fill(farm.db)
        writer.submit_many(
            IncomingReading(farm.sensor, "ph", "pH", 6.0 + i / 1000, T0 + i, device_ts=T0 + i)
            for i in range(READINGS)
        )
        await eventually(lambda: writer.stalled_since is not None)
        assert writer.stats.lost == 0 and writer.queued > 0
        # The readings before the refusal are stored; the refused batch waits in the queue.
        assert farm.db.refused is not None and "full" in farm.db.refused

        await farm.db.cap(None)
        await writer.flush(timeout=30)

        assert writer.stalled_since is None and farm.db.refused is None
        assert writer.stats.lost == 0 and writer.stats.space_refusals > 0
        assert await count(farm.db, "readings") == READINGS
        assert await farm.db.fetch_value("SELECT sum(n) FROM readings_1m") == READINGS
        assert await farm.db.fetch_value("PRAGMA integrity_check") == "ok"
    finally:
        await writer.stop()


async def test_other_failures_still_give_up_after_their_attempts(farm: Farm) -> None:
    # A refusal for lack of space is retried for ever; a batch the database rejects for another
    # reason is not (it would block every reading after it).
    writer = ReadingWriter(
        farm.store, retry_delay=0.001, commit_attempts=2, max_age_ms=10_000 * DAY
    )
    await writer.start()
    try:
        await farm.db.write(lambda conn: conn.execute("DROP TRIGGER readings_rollup"))
        await farm.db.write(
            lambda conn: conn.execute(
                "CREATE TRIGGER broken BEFORE INSERT ON readings"
                " BEGIN SELECT RAISE(ABORT, 'broken'); END"
            )
        )
        writer.submit(IncomingReading(farm.sensor, "ph", "pH", 6.0, T0, device_ts=T0))
        await asyncio.wait_for(writer.flush(), 10)
        assert writer.stats.lost == 1 and writer.stalled_since is None
    finally:
        await writer.stop()
