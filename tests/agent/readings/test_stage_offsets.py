"""Staged readings keep their times as offsets from the stage's base time (migration 0119): a
row is 3 bytes shorter on the SD card, and every reading reads back exactly as it was written,
across the folds that move the base and across the upgrade."""

from __future__ import annotations

from pathlib import Path

from agent.store.db import Database
from agent.store.readings import BUCKET_MS, NewReading, ReadingStore, Resolution
from tests.agent.readings.conftest import MIN, T0, Farm, readings
from tests.support.migrations import database_before
from tests.support.reading_seed import add_device, add_farm, add_series, add_user

# SQLite stores an integer in 3 bytes in this range (https://www.sqlite.org/fileformat.html).
THREE_BYTES = 2**23


async def _offsets(db: Database) -> tuple[int, int]:
    row = await db.fetch_one("SELECT min(dts), max(dts) FROM readings_stage_rows")
    assert row is not None
    return int(row[0]), int(row[1])


async def test_staged_readings_keep_their_times_as_the_fold_moves_the_base(farm: Farm) -> None:
    now = [T0 + BUCKET_MS + MIN]
    store = ReadingStore(farm.db, staged=True, now=lambda: now[0])
    first = list(range(T0, now[0], 10_000))
    await store.write(readings(farm.sensor, first, [float(k % 7) for k in range(len(first))]))
    await store.fold()

    assert await farm.db.fetch_value("SELECT stage_base FROM readings_fold") == T0 + BUCKET_MS
    low, high = await _offsets(farm.db)
    assert 0 <= low <= high < MIN, "the bucket under way, kept, is re-based"
    # The next readings, to the end of the bucket under way, are stored as small offsets too.
    second = list(range(now[0], T0 + 2 * BUCKET_MS, 10_000))
    await store.write(readings(farm.sensor, second, [float(k % 5) for k in range(len(second))]))
    low, high = await _offsets(farm.db)
    assert 0 <= low <= high < min(BUCKET_MS, THREE_BYTES)

    staged = await farm.db.fetch_all("SELECT ts FROM readings_stage ORDER BY seq")
    assert [row[0] for row in staged] == first[-6:] + second
    now[0] = T0 + 2 * BUCKET_MS + MIN
    await store.fold()
    info = await store.find_series(farm.sensor, "ph")
    assert info is not None
    points = await store.points(info.id, Resolution.RAW, T0, now[0])
    assert [p.ts for p in points] == first + second


async def test_an_upgrade_keeps_the_staged_readings_times_and_numbers(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    async with database_before(path, 119) as before:
        device = await add_device(before, await add_farm(before, await add_user(before)))
        old = [(900 + k, T0 + k * 1000, 6.5 + k) for k in range(4)]
        series_id = await add_series(before, device, unit="pH")
        async with before.transaction() as conn:
            await conn.executemany(
                "INSERT INTO readings_stage (seq, series_id, ts, value) VALUES (?, ?, ?, ?)",
                [(seq, series_id, ts, value) for seq, ts, value in old],
            )

    after = Database(path)
    await after.open()
    try:
        rows = await after.fetch_all("SELECT seq, ts, value FROM readings_stage ORDER BY seq")
        assert [tuple(row) for row in rows] == old
        queued = await after.fetch_all("SELECT seq, ts FROM outbox_staged ORDER BY seq")
        assert [tuple(row) for row in queued] == [(seq, ts) for seq, ts, _ in old]
        store = ReadingStore(after, staged=True, now=lambda: T0 + BUCKET_MS + MIN)
        await store.write([NewReading(device, "ph", "pH", T0 + 9_000, 1.0)])
        assert await store.fold() == 5
        points = await store.points(series_id, Resolution.RAW, T0, T0 + MIN)
        assert [(p.ts, p.mean) for p in points] == [
            *((ts, value) for _, ts, value in old),
            (T0 + 9_000, 1.0),
        ]
    finally:
        await after.close()
