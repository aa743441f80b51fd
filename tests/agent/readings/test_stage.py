"""Staged readings (SD card wear): committed to an append-only stage, folded into the series
tables later; every read sees each reading once, before, during and after the fold."""

from __future__ import annotations

import random

import pytest

from agent.store.db import Database
from agent.store.readings import NewReading, ReadingStore, Resolution
from tests.agent.readings.conftest import HOUR, MIN, T0, Farm, count, readings, stamps
from tests.agent.readings.test_rollups import assert_rollups_match, expected


@pytest.fixture
def staged(farm: Farm) -> Farm:
    """The farm with a store that stages its batches (small fold chunks: several per fold)."""
    farm.store = ReadingStore(farm.db, staged=True, fold_chunk=7)
    return farm


async def series_id(farm: Farm, device_id: str, metric: str = "ph") -> int:
    info = await farm.store.find_series(device_id, metric)
    assert info is not None
    return info.id


async def test_a_reading_is_read_back_right_after_its_commit_and_after_the_fold(
    staged: Farm,
) -> None:
    stamps = [T0 + 10 * k * 1000 for k in range(500)]  # 10 s apart: over an hour
    values = [float(k % 17) for k in range(500)]
    await staged.store.write(readings(staged.sensor, stamps, values))
    assert await count(staged.db, "readings") == 0, "nothing folded yet"
    sid = await series_id(staged, staged.sensor)

    async def everything() -> tuple[object, ...]:
        store = staged.store
        return (
            await store.points(sid, Resolution.RAW, 0, 2**62),
            await store.points(sid, Resolution.MINUTE, 0, 2**62),
            await store.points(sid, Resolution.HOUR, 0, 2**62),
            await store.points(sid, Resolution.MINUTE, 0, 2**62, bucket_ms=5 * MIN),
            await store.oldest(sid, Resolution.RAW),
            await store.count_upto(sid, Resolution.MINUTE, T0, T0 + HOUR, 10_000),
        )

    before = await everything()
    raw = before[0]
    assert [(p.ts, p.mean) for p in raw] == list(zip(stamps, values, strict=True))  # type: ignore[attr-defined]
    minutes = {p.ts: (p.min, p.max, p.mean, p.count) for p in before[1]}  # type: ignore[attr-defined]
    assert_rollups_match(minutes, expected(stamps, values, MIN))
    assert before[5] == 60

    assert await staged.store.fold() == 500
    assert await count(staged.db, "readings_stage") == 0
    assert await everything() == before


async def test_rollups_agree_when_folds_land_between_late_and_out_of_order_batches(
    staged: Farm,
) -> None:
    rng = random.Random(25)
    stamps = [T0 + k * 7_000 for k in range(900)]
    values = [round(rng.uniform(5, 8), 2) for _ in stamps]
    order = list(range(900))
    rng.shuffle(order)
    for start in range(0, 900, 60):
        part = sorted(order[start : start + 60])
        await staged.store.write(
            readings(staged.sensor, [stamps[i] for i in part], [values[i] for i in part])
        )
        if rng.random() < 0.4:
            await staged.store.fold()
    sid = await series_id(staged, staged.sensor)
    for resolution, step in ((Resolution.MINUTE, MIN), (Resolution.HOUR, HOUR)):
        points = await staged.store.points(sid, resolution, 0, 2**62)
        got = {p.ts: (p.min, p.max, p.mean, p.count) for p in points}
        assert_rollups_match(got, expected(stamps, values, step))
    await staged.store.fold()
    assert await count(staged.db, "readings") == 900
    assert int(await staged.db.fetch_value("SELECT sum(n) FROM readings_1m")) == 900
    # Each folded reading was queued for the cloud once (nothing acknowledged it).
    assert await count(staged.db, "outbox_readings") == 900
    assert await count(staged.db, "outbox_staged") == 0


async def test_a_redelivered_reading_is_stored_once_staged_or_folded(staged: Farm) -> None:
    first = readings(staged.sensor, [T0, T0 + 1000], [1.0, 2.0])
    outcome = await staged.store.write(first)
    assert len(outcome.inserted) == 2
    again = await staged.store.write(readings(staged.sensor, [T0 + 1000], [2.0]))
    assert (len(again.inserted), again.duplicates) == (0, 1), "a staged reading"
    await staged.store.fold()
    # A fresh store (a restart) knows nothing in memory: the database decides.
    restarted = ReadingStore(staged.db, staged=True)
    later = await restarted.write(readings(staged.sensor, [T0, T0 + 2000], [1.0, 3.0]))
    assert (len(later.inserted), later.duplicates) == (1, 1), "a folded reading"
    late = await restarted.write(readings(staged.sensor, [T0 + 2000, T0 + 500], [3.0, 9.0]))
    assert (len(late.inserted), late.duplicates) == (1, 1), "staged by the restarted store"
    await restarted.fold()
    assert await count(staged.db, "readings") == 4


async def test_receive_stamps_stay_distinct_across_the_stage_and_a_restart(
    staged: Farm,
) -> None:
    """Readings stamped on receipt in one millisecond each take their own; a restarted store
    (no memory of the stamps it gave) still finds the staged ones taken."""

    def burst(n: int) -> list[NewReading]:
        return [
            NewReading(staged.sensor, "ph", "pH", T0, float(k), on_receipt=True) for k in range(n)
        ]

    await staged.store.write(burst(5))
    restarted = ReadingStore(staged.db, staged=True)
    await restarted.write(burst(5))
    sid = await series_id(staged, staged.sensor)
    points = await restarted.points(sid, Resolution.RAW, 0, 2**62)
    assert [p.ts for p in points] == [T0 + k for k in range(10)]
    await restarted.fold()
    assert await count(staged.db, "readings") == 10


async def test_the_fold_stamps_last_reading_and_a_deleted_device_takes_its_staged_readings(
    staged: Farm,
) -> None:
    await staged.store.write(readings(staged.sensor, [T0, T0 + 60_000], [1.0, 2.0]))
    await staged.store.write(readings(staged.other, [T0 + 5], [4.0]))
    await staged.db.write_statement("DELETE FROM devices WHERE id = ?", (staged.other,))
    assert await count(staged.db, "readings_stage") == 2
    assert await staged.store.fold() == 2
    last, _ = await stamps(staged.db, staged.sensor)
    assert last == "2024-01-01T00:01:00.000Z"


async def test_the_fold_stamps_last_reading_of_the_bucket_under_way(farm: Farm) -> None:
    """Readings the fold leaves staged (their bucket has not ended) still stamp their devices:
    each series' newest, whichever device has most."""
    store = ReadingStore(farm.db, staged=True, now=lambda: T0 + 10 * MIN, last_reading_every_s=3600)
    await store.write(readings(farm.sensor, [T0 + 3_000, T0 + 1_000], [1.0, 2.0]))
    await store.write(readings(farm.sensor, [T0 + 2_000], [3.0], metric="ec"))
    await store.write(readings(farm.other, [T0 + 500], [4.0]))
    assert (await stamps(farm.db, farm.sensor))[0] is None  # not stamped by the writes
    assert await store.fold() == 0
    assert (await stamps(farm.db, farm.sensor))[0] == "2024-01-01T00:00:03.000Z"
    assert (await stamps(farm.db, farm.other))[0] == "2024-01-01T00:00:00.500Z"
    assert await count(farm.db, "readings_stage") == 4


async def test_a_fold_cut_short_is_resumed_without_counting_a_reading_twice(
    staged: Farm, db: Database
) -> None:
    """A crash between two chunks of a fold: what was folded is in the series tables, hidden
    from the stage's view; the next fold moves the rest and counts nothing twice."""
    sensors = [staged.sensor, staged.other]
    for device in sensors:
        await staged.store.write(readings(device, [T0 + k * 1000 for k in range(20)], [1.0] * 20))
    chunks: list[object] = []
    original = db.write

    async def crash_after_first_chunk(work, **kwargs):  # type: ignore[no-untyped-def]
        if chunks:
            raise RuntimeError("power cut")
        chunks.append(work)
        return await original(work, **kwargs)

    db.write = crash_after_first_chunk  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await staged.store.fold()
    db.write = original  # type: ignore[method-assign]
    assert 0 < await count(db, "readings") < 40
    assert await count(db, "readings_all") == 40, "each reading seen once, mid-fold"
    # Staged after the fold began: the resumed fold moves them too.
    await staged.store.write(readings(staged.sensor, [T0 + 99_000], [2.0]))
    assert await staged.store.fold() == 40 - 20 + 1
    assert await count(db, "readings") == 41
    assert int(await db.fetch_value("SELECT sum(n) FROM readings_1h")) == 41
    assert await count(db, "readings_stage") == 0


async def test_a_staged_reading_is_queued_for_the_cloud_by_its_stage_row_alone(
    staged: Farm,
) -> None:
    """The commit writes the stage row and no copy of it: the row is the reading's place in
    the sync outbox, numbered in its sequence. Not acknowledged by the cloud (an outage), it
    is queued in ``outbox_readings`` by the fold, once."""
    await staged.store.write(readings(staged.sensor, [T0, T0 + 1000], [1.0, 2.0]))
    assert await count(staged.db, "outbox_readings") == 0
    staged_rows = await staged.db.fetch_all("SELECT seq, ts, value FROM readings_stage")
    queued = await staged.db.fetch_all("SELECT seq, ts, value FROM outbox_staged ORDER BY seq")
    assert [tuple(r) for r in queued] == [tuple(r) for r in staged_rows]
    assert [(int(ts), float(v)) for _, ts, v in queued] == [(T0, 1.0), (T0 + 1000, 2.0)]
    assert await staged.store.fold() == 2
    # The fold queues them under their numbers, and names the newest per series.
    moved = await staged.db.fetch_all("SELECT seq, ts, value FROM outbox_readings ORDER BY seq")
    assert [tuple(r) for r in moved] == [tuple(r) for r in queued]
    assert await count(staged.db, "outbox_staged") == 0
    latest = await staged.db.fetch_value(
        "SELECT r.ts FROM outbox_latest AS l JOIN outbox_readings AS r ON r.seq = l.seq"
    )
    assert latest == T0 + 1000


async def test_last_reading_moves_between_folds(farm: Farm) -> None:
    farm.store = ReadingStore(farm.db, staged=True, last_reading_every_s=0)
    await farm.store.write(readings(farm.sensor, [T0 + 60_000], [1.0]))
    await farm.store.write(readings(farm.sensor, [T0 + 120_000], [2.0]))
    last, _ = await stamps(farm.db, farm.sensor)
    assert last == "2024-01-01T00:01:00.000Z", "stamped with the next batch, no fold"
    assert await count(farm.db, "readings") == 0


async def test_readings_staged_while_a_fold_runs_stay_staged_until_the_next(
    staged: Farm, db: Database
) -> None:
    """The fold empties the stage whole (cheap on the card) and puts back what was committed
    while it ran: each reading is seen once throughout and folded once, by the next fold."""
    await staged.store.write(
        readings(staged.sensor, [T0 + k * 1000 for k in range(30)], [1.0] * 30)
    )
    original = db.write
    late = [T0 + 500_000 + k * 1000 for k in range(3)]

    async def commit_meanwhile(work, **kwargs):  # type: ignore[no-untyped-def]
        if late:
            stamps = list(late)
            late.clear()
            await staged.store.write(readings(staged.other, stamps, [2.0] * 3))
        return await original(work, **kwargs)

    db.write = commit_meanwhile  # type: ignore[method-assign]
    try:
        assert await staged.store.fold() == 30
    finally:
        db.write = original  # type: ignore[method-assign]
    assert await count(db, "readings_stage") == 3
    assert await count(db, "readings_all") == 33
    assert await staged.store.fold() == 3
    assert await count(db, "readings") == 33
    assert int(await db.fetch_value("SELECT sum(n) FROM readings_1h")) == 33
