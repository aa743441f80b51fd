"""Readings keyed by 30-minute time buckets (migration 0117): the fold moves whole buckets, a
late reading lands in its own bucket once, and a farm's readings from before the upgrade stay
where they were and are read, pruned and deduplicated alongside the new ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.services.ingest.reading_runtime import ReadingRuntime
from agent.services.readings.query import ReadingQuery
from agent.services.readings.retention import ReadingRetention, RetentionPolicy
from agent.services.readings.writer import ReadingWriter
from agent.store.db import Database
from agent.store.reading_windows import ReadingWindows
from agent.store.readings import BUCKET_MS, NewReading, ReadingStore, Resolution, StampShift
from agent.sync.outbox import OutboxStore
from tests.agent.readings.conftest import DAY, HOUR, MIN, T0, Farm, count, readings
from tests.support.migrations import database_before
from tests.support.reading_seed import add_device, add_farm, add_series, add_user

# The fold runs a minute after a bucket ends (agent/services/ingest/reading_runtime.py).
GRACE = MIN


async def series_id(farm: Farm, device_id: str) -> int:
    info = await farm.store.find_series(device_id, "ph")
    assert info is not None
    return info.id


async def test_a_fold_moves_the_buckets_that_ended_and_leaves_the_one_under_way_staged(
    farm: Farm,
) -> None:
    now = [T0 + BUCKET_MS + GRACE]
    store = ReadingStore(farm.db, staged=True, fold_chunk=7, now=lambda: now[0])
    # Every 10 s from the start of one bucket to a minute into the next.
    stamps = list(range(T0, now[0], 10_000))
    values = [float(k % 13) for k in range(len(stamps))]
    await store.write(readings(farm.sensor, stamps, values))

    assert await store.fold() == 180
    assert await count(farm.db, "readings_stage") == 6, "the bucket under way stays staged"
    buckets = await farm.db.fetch_all("SELECT DISTINCT bucket FROM readings")
    assert [row[0] for row in buckets] == [T0 // BUCKET_MS]
    sid = await series_id(farm, farm.sensor)
    raw = await store.points(sid, Resolution.RAW, T0, now[0])
    assert [(p.ts, p.mean) for p in raw] == list(zip(stamps, values, strict=True))

    now[0] += BUCKET_MS
    assert await store.fold() == 6
    assert await count(farm.db, "readings_stage") == 0
    assert await count(farm.db, "readings") == 186


async def test_a_late_reading_into_a_folded_bucket_is_stored_once_and_rolled_up(
    farm: Farm,
) -> None:
    store = ReadingStore(farm.db, staged=True, now=lambda: T0 + 2 * BUCKET_MS + GRACE)
    stamps = [T0 + k * MIN for k in range(60)]
    await store.write(readings(farm.sensor, stamps, [2.0] * 60))
    assert await store.fold() == 60

    late = T0 + 5 * MIN + 30_000  # in the first bucket, folded already
    await store.write(readings(farm.sensor, [late], [8.0]))
    assert await store.fold() == 1
    again = await store.write(readings(farm.sensor, [late], [8.0]))  # re-delivered
    assert (len(again.inserted), again.duplicates) == (0, 1)
    assert await store.fold() == 0

    rows = await farm.db.fetch_all("SELECT bucket FROM readings WHERE ts = ?", (late,))
    assert [row[0] for row in rows] == [T0 // BUCKET_MS]
    sid = await series_id(farm, farm.sensor)
    [minute] = await store.points(sid, Resolution.MINUTE, T0 + 5 * MIN, T0 + 6 * MIN)
    assert (minute.count, minute.min, minute.max, minute.mean) == (2, 2.0, 8.0, 5.0)
    [hour] = await store.points(sid, Resolution.HOUR, T0, T0 + HOUR)
    assert (hour.count, hour.max) == (61, 8.0)


async def test_deleting_a_series_removes_its_bucketed_rows_only(farm: Farm) -> None:
    stamps = [T0 + k * 7 * MIN for k in range(40)]  # over four hours: several buckets
    await farm.store.write(readings(farm.sensor, stamps, [1.0] * 40))
    await farm.store.write(readings(farm.other, stamps, [1.0] * 40))
    async with farm.db.transaction() as conn:
        await conn.execute("DELETE FROM devices WHERE id = ?", (farm.sensor,))
    sid = await series_id(farm, farm.other)
    for table in ("readings", "readings_1m", "readings_1h", "readings_latest"):
        rows = await farm.db.fetch_all(f"SELECT DISTINCT series_id FROM {table}")
        assert [row[0] for row in rows] == [sid], table


@pytest.fixture
async def upgraded(tmp_path: Path) -> AsyncIterator[Farm]:
    """A farm whose database held readings before 0117: two sensors, a day of readings every
    10 minutes up to T0, written by the series-ordered schema; then upgraded."""
    path = tmp_path / "agent.db"
    async with database_before(path, 117) as before:
        admin = await add_user(before)
        farm_id = await add_farm(before, admin)
        sensor, other = await add_device(before, farm_id), await add_device(before, farm_id)
        for device in (sensor, other):
            sid = await add_series(before, device, unit="pH")
            async with before.transaction() as conn:
                await conn.executemany(
                    "INSERT INTO readings (series_id, ts, value) VALUES (?, ?, 6.0)",
                    [(sid, T0 - DAY + k * 10 * MIN) for k in range(144)],
                )

    db = Database(path)
    await db.open()
    try:
        yield Farm(db, ReadingStore(db), admin, farm_id, sensor, other)
    finally:
        await db.close()


async def test_the_upgrade_moves_no_reading_and_reads_both_layouts(
    upgraded: Farm,
) -> None:
    farm = upgraded
    assert await count(farm.db, "readings_by_series") == 288, "kept where they were"
    assert await count(farm.db, "readings") == 0
    # A day later, readings every 10 minutes again, in the new tables; one re-delivered old
    # reading is a duplicate.
    after = [T0 + k * 10 * MIN for k in range(144)]
    outcome = await farm.store.write(readings(farm.sensor, [T0 - DAY, *after], [7.0] * 145))
    assert (len(outcome.inserted), outcome.duplicates) == (144, 1)
    assert await count(farm.db, "readings") == 144

    sid = await series_id(farm, farm.sensor)
    raw = await farm.store.points(sid, Resolution.RAW, T0 - DAY, T0 + DAY)
    assert [p.ts for p in raw] == [T0 - DAY + k * 10 * MIN for k in range(288)]
    assert [p.mean for p in raw] == [6.0] * 144 + [7.0] * 144
    minutes = await farm.store.points(sid, Resolution.MINUTE, T0 - DAY, T0 + DAY)
    assert len(minutes) == 288 and {p.count for p in minutes} == {1}
    assert await farm.store.oldest(sid, Resolution.RAW) == T0 - DAY
    assert await farm.store.count_upto(sid, Resolution.RAW, T0 - HOUR, T0 + HOUR, 1000) == 12

    query = ReadingQuery(farm.db, farm.store, RetentionPolicy(), now=lambda: T0 + DAY)
    whole = await query.series(farm.admin, farm.sensor, "ph", T0 - DAY, T0 + DAY)
    assert sum(p.count for p in whole.points) == 288

    windows = {
        w.device_id: w
        for w in await ReadingWindows(farm.db).of_devices(
            [farm.sensor, farm.other], T0 - HOUR + 5 * MIN, T0 + HOUR + 5 * MIN
        )
    }
    assert windows[farm.sensor].count == 12 and windows[farm.sensor].sum == 5 * 6.0 + 7 * 7.0
    assert (windows[farm.sensor].latest_ts, windows[farm.sensor].latest_value) == (
        after[-1],
        7.0,
    )
    assert (windows[farm.other].latest_ts, windows[farm.other].latest_value) == (
        T0 - 10 * MIN,
        6.0,
    )


async def test_retention_prunes_readings_from_before_the_upgrade_and_after(
    upgraded: Farm,
) -> None:
    farm = upgraded
    after = [T0 + k * 10 * MIN for k in range(144)]
    await farm.store.write(readings(farm.sensor, after, [7.0] * 144))
    # Raw readings are kept a day: at T0 + 1.5 days, those before T0 + 12 h go.
    retention = ReadingRetention(
        farm.store, RetentionPolicy(raw_s=86_400.0), chunk=50, now=lambda: T0 + DAY + DAY // 2
    )

    report = await retention.run()

    assert report.raw == 288 + 72
    assert await count(farm.db, "readings_by_series") == 0
    assert await farm.db.fetch_value("SELECT min(ts) FROM readings") == T0 + DAY // 2
    windows = {
        w.device_id: w
        for w in await ReadingWindows(farm.db).of_devices([farm.sensor, farm.other], T0, T0 + DAY)
    }
    assert windows[farm.other].latest_ts is None, "no raw reading of it is left"
    assert windows[farm.sensor].latest_ts == after[-1]
    # The rollups of the pruned readings stay.
    sid = await series_id(farm, farm.other)
    hours = await farm.store.points(sid, Resolution.HOUR, T0 - DAY, T0)
    assert len(hours) == 24 and {p.count for p in hours} == {6}


async def test_the_fold_runs_a_minute_after_each_bucket_ends_or_when_a_backlog_grows(
    farm: Farm,
) -> None:
    now = [T0 + BUCKET_MS + 30_000]
    folds: list[int] = []
    ended = [0]  # staged readings of the buckets that have ended

    async def fold(*, whole_buckets: bool = True) -> int:
        folds.append(now[0])
        ended[0] = 0
        return 0

    async def foldable() -> int:
        return ended[0]

    runtime = ReadingRuntime(
        ReadingWriter(farm.store),
        ReadingRetention(farm.store, RetentionPolicy()),
        retention_interval_s=3600,
        fold=fold,
        fold_interval_s=1800,
        foldable=foldable,
        fold_rows=1000,
        now_ms=lambda: now[0],
    )
    for moment, rows in (
        (T0 + BUCKET_MS + 30_000, 0),  # start-up: what a previous run staged
        (T0 + BUCKET_MS + 59_000, 900),  # a backlog of ended buckets, with room in the stage
        (T0 + BUCKET_MS + 61_000, 900),  # a minute after the bucket ended
        (T0 + 2 * BUCKET_MS, 999),
        (T0 + 2 * BUCKET_MS + 10_000, 1_000),  # 1,000 of ended buckets (a backlog's catch-up)
        (T0 + 2 * BUCKET_MS + 50_000, 0),  # however many of the bucket under way
        (T0 + 2 * BUCKET_MS + GRACE, 0),
    ):
        now[0], ended[0] = moment, max(ended[0], rows)
        await runtime.fold_if_due()
    assert folds == [
        T0 + BUCKET_MS + 30_000,
        T0 + BUCKET_MS + 61_000,
        T0 + 2 * BUCKET_MS + 10_000,
        T0 + 2 * BUCKET_MS + GRACE,
    ]


async def test_only_readings_of_ended_buckets_count_towards_an_early_fold(farm: Farm) -> None:
    """A farm's trickle fills the stage with the bucket under way, which no fold moves before
    it ends: it starts no fold early."""
    store = ReadingStore(farm.db, staged=True, now=lambda: T0 + BUCKET_MS + 10 * MIN)
    ended = [T0 + BUCKET_MS - k * 1000 for k in range(1, 4)]
    under_way = [T0 + BUCKET_MS + k * 1000 for k in range(5)]
    await store.write(readings(farm.sensor, ended + under_way, [6.0] * 8))
    assert await store.stage_size() == 8
    assert await store.foldable() == 3
    await store.fold()
    assert (await store.stage_size(), await store.foldable()) == (5, 0)


async def test_a_clock_jump_moves_receive_stamps_of_the_bucket_under_way(farm: Farm) -> None:
    # The agent's clock is in the bucket the readings were stamped in: a fold keeps them
    # staged, the move must not.
    store = ReadingStore(farm.db, staged=True, now=lambda: T0 + 10 * MIN)
    stamps = [T0 + k * 1000 for k in range(5)]
    await store.write(
        [NewReading(farm.sensor, "ph", "pH", ts, 6.0, on_receipt=True) for ts in stamps]
    )

    moved = await store.shift_receive_stamps(
        [StampShift(farm.sensor, "ph", stamps[0], stamps[-1], DAY)]
    )

    assert moved == 5
    sid = await series_id(farm, farm.sensor)
    raw = await store.points(sid, Resolution.RAW, T0, T0 + 2 * DAY)
    assert [p.ts for p in raw] == [ts + DAY for ts in stamps]
    [hour] = await store.points(sid, Resolution.HOUR, T0, T0 + 2 * DAY)
    assert (hour.ts, hour.count) == (T0 + DAY, 5)


async def test_before_a_catch_up_the_bucket_under_way_is_folded_so_the_latest_state_goes_first(
    farm: Farm,
) -> None:
    """After an outage the uploader sends the newest reading of every series first, from what
    the fold queued: the fold it runs first takes the bucket under way too."""
    outbox = OutboxStore(farm.db)
    await outbox.acknowledge(await outbox.take(100), 0, 0)  # the farm and its devices
    now = T0 + 10 * MIN
    store = ReadingStore(farm.db, staged=True, now=lambda: now)
    stamps = list(range(T0, now, 10_000))
    await store.write(readings(farm.sensor, stamps, [float(k) for k in range(len(stamps))]))
    runtime = ReadingRuntime(
        ReadingWriter(store),
        ReadingRetention(store, RetentionPolicy()),
        retention_interval_s=3600,
        fold=store.fold,
        fold_interval_s=1800,
        stage_size=store.stage_size,
    )
    assert await runtime.fold_now(whole_buckets=False) == len(stamps)
    latest = await outbox.take(1, latest_first=True)
    assert [(r.ts, r.value) for r in latest.readings] == [(stamps[-1], float(len(stamps) - 1))]


async def test_the_scheduled_fold_and_a_catch_up_fold_never_run_at_once(farm: Farm) -> None:
    """Both would move and queue the same staged rows: the second waits for the first."""
    running: list[int] = []
    overlapped = False
    release = asyncio.Event()

    async def fold(*, whole_buckets: bool = True) -> int:
        nonlocal overlapped
        overlapped = overlapped or bool(running)
        running.append(1)
        await release.wait()
        running.pop()
        return 0

    runtime = ReadingRuntime(
        ReadingWriter(farm.store),
        ReadingRetention(farm.store, RetentionPolicy()),
        retention_interval_s=3600,
        fold=fold,
        fold_interval_s=1800,
    )
    scheduled = asyncio.create_task(runtime.fold_now())
    catch_up = asyncio.create_task(runtime.fold_now(whole_buckets=False))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(scheduled, catch_up)
    assert not overlapped
