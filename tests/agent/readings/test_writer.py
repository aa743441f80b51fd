"""The ingest writer: batches, durability on stop, rejections, calibration, fan-out."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.devices.calibration import LinearCalibration
from agent.devices.codec import Measurement
from agent.services.readings.writer import IncomingReading, ReadingWriter, incoming, to_ms
from agent.store.db import Database
from agent.store.readings import NewReading, ReadingStore, Resolution, WriteOutcome
from protocol.timefmt import iso
from tests.agent.readings.conftest import DAY, MIN, T0, Farm, count, stamps

WAIT = 10.0


@pytest.fixture
async def make_writer(farm: Farm) -> AsyncIterator[Callable[..., Any]]:
    """Build and start writers on the farm's store; stopped at teardown."""
    writers: list[ReadingWriter] = []

    async def build(**options: Any) -> ReadingWriter:
        options.setdefault("max_age_ms", 10_000 * DAY)  # tests use fixed 2024 timestamps
        writer = ReadingWriter(options.pop("store", farm.store), **options)
        await writer.start()
        writers.append(writer)
        return writer

    yield build
    for writer in writers:
        await writer.stop()


def reading(device: str, value: float, ts: int = T0, **extra: Any) -> IncomingReading:
    """An incoming pH reading received at ``ts``."""
    return IncomingReading(device, "ph", "pH", value, received_ts=ts, **extra)


async def stored(farm: Farm, device: str, metric: str = "ph") -> list[tuple[Any, ...]]:
    """(ts, value, raw, received_ts) rows of a series, by time."""
    rows = await farm.db.fetch_all(
        "SELECT r.ts, r.value, r.raw, r.received_ts FROM readings r"
        " JOIN series s ON s.id = r.series_id WHERE s.device_id = ? AND s.metric = ?"
        " ORDER BY r.ts",
        (device, metric),
    )
    return [tuple(row) for row in rows]


async def test_readings_are_stored_after_flush(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer(batch_interval=60.0)
    assert writer.submit_many(reading(farm.sensor, 6.0 + i / 10, T0 + i * 1000) for i in range(5))

    await writer.flush()

    assert [row[:2] for row in await stored(farm, farm.sensor)] == [
        (T0 + i * 1000, 6.0 + i / 10) for i in range(5)
    ]
    assert writer.stats.committed == 5 and writer.stats.commits == 1


async def test_stop_commits_everything_queued(tmp_path: Any, farm: Farm) -> None:
    writer = ReadingWriter(farm.store, batch_interval=60.0, max_age_ms=10_000 * DAY)
    await writer.start()
    writer.submit_many(reading(farm.sensor, 7.0, T0 + i) for i in range(1234))

    await writer.stop()
    await farm.db.close()
    reopened = Database(farm.db.path)
    await reopened.open()
    try:
        assert await count(reopened, "readings") == 1234
    finally:
        await reopened.close()
        await farm.db.open()  # the fixture closes it again
    assert not writer.submit(reading(farm.sensor, 7.0, T0 - 1))
    assert writer.stats.closed == 1


async def test_one_commit_per_interval_and_early_when_the_batch_is_full(
    farm: Farm, make_writer: Any
) -> None:
    slow = await make_writer(batch_interval=60.0)
    slow.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(500))
    await slow.flush()
    assert slow.stats.commits == 1

    full = await make_writer(batch_interval=60.0, max_batch=10)
    full.submit_many(reading(farm.other, 6.0, T0 + i) for i in range(25))
    await full.flush()
    assert full.stats.commits == 3 and full.stats.committed == 25


async def test_batches_are_cut_small_while_a_request_is_answered(
    farm: Farm, make_writer: Any
) -> None:
    answering = [True]
    writer = await make_writer(
        batch_interval=60.0, max_batch=2000, busy_batch=10, busy=lambda: answering[0]
    )
    writer.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(25))
    await writer.flush()
    assert writer.stats.commits == 3 and writer.stats.committed == 25

    answering[0] = False
    writer.submit_many(reading(farm.other, 6.0, T0 + i) for i in range(25))
    await writer.flush()
    assert writer.stats.commits == 4 and writer.stats.committed == 50


async def test_batches_grow_while_no_request_came_for_a_while(farm: Farm, make_writer: Any) -> None:
    quiet = [True]
    writer = await make_writer(
        batch_interval=60.0, max_batch=10, quiet_batch=100, quiet=lambda: quiet[0]
    )
    writer.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(25))
    await writer.flush()
    assert writer.stats.commits == 1 and writer.stats.committed == 25

    quiet[0] = False  # requests again: a command record must not wait behind a long batch
    writer.submit_many(reading(farm.other, 6.0, T0 + i) for i in range(25))
    await writer.flush()
    assert writer.stats.commits == 4 and writer.stats.committed == 50


async def test_a_batch_stamps_its_devices_last_reading_in_its_own_commit(farm: Farm) -> None:
    await farm.store.write(
        [
            NewReading(farm.sensor, "ph", "pH", T0 + 5000, 6.0),
            NewReading(farm.sensor, "ph", "pH", T0 + 1000, 6.1),
            NewReading(farm.other, "ph", "pH", T0, 6.2),
        ]
    )
    newest = iso(datetime.fromtimestamp((T0 + 5000) / 1000, UTC))
    assert await stamps(farm.db, farm.sensor) == (newest, newest)
    assert (await stamps(farm.db, farm.other))[0] == iso(datetime.fromtimestamp(T0 / 1000, UTC))

    await farm.store.write([NewReading(farm.sensor, "ph", "pH", T0 + 2000, 6.3)])
    assert await stamps(farm.db, farm.sensor) == (
        newest,
        newest,
    )  # an older one never moves it back


async def test_commit_waits_at_most_one_interval(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer(batch_interval=0.05)
    with writer.subscribe() as listener:
        writer.submit(reading(farm.sensor, 6.0))
        # No flush: the interval alone must commit it.
        committed = await asyncio.wait_for(listener.get(), WAIT)
    assert committed.value == 6.0
    assert len(await stored(farm, farm.sensor)) == 1


async def test_batches_wait_longer_while_nobody_watches_and_not_once_a_tablet_does(
    farm: Farm, make_writer: Any
) -> None:
    watching = False
    writer = await make_writer(
        batch_interval=0.05, unwatched_interval=3600.0, watched=lambda: watching
    )
    with writer.subscribe() as listener:
        writer.submit(reading(farm.sensor, 6.0))
        first = asyncio.ensure_future(listener.get())
        # Nobody watches: the batch may wait an hour; a flush still commits it at once.
        await writer.flush(WAIT)
        assert (await asyncio.wait_for(first, WAIT)).value == 6.0
        watching = True
        writer.submit(reading(farm.sensor, 6.1, T0 + 1000))
        # A tablet watches: the short interval alone commits it (an hour would time out).
        assert (await asyncio.wait_for(listener.get(), WAIT)).value == 6.1
    assert len(await stored(farm, farm.sensor)) == 2


async def test_a_batch_commits_once_commit_rows_readings_came_one_by_one(
    farm: Farm, make_writer: Any
) -> None:
    # The interval is far beyond the wait: only the count can close the batch.
    writer = await make_writer(batch_interval=600.0, commit_rows=10)
    with writer.subscribe() as listener:
        for i in range(10):
            writer.submit(reading(farm.sensor, 6.0, T0 + i))
            await asyncio.sleep(0)  # each arrives on its own, as messages do
        got = [await asyncio.wait_for(listener.get(), WAIT) for _ in range(10)]
    assert [r.ts for r in got] == [T0 + i for i in range(10)]
    assert writer.stats.commits == 1


async def test_readings_that_come_while_a_batch_waits_all_join_it(
    farm: Farm, make_writer: Any
) -> None:
    writer = await make_writer(batch_interval=0.2, commit_rows=1000)
    with writer.subscribe() as listener:
        for i in range(7):
            writer.submit(reading(farm.sensor, 6.0, T0 + i))
            await asyncio.sleep(0)
        got = [await asyncio.wait_for(listener.get(), WAIT) for _ in range(7)]
    assert [r.ts for r in got] == [T0 + i for i in range(7)]
    assert writer.stats.commits == 1 and writer.stats.committed == 7


async def test_the_close_of_a_batch_is_told_only_while_readings_trickle(
    farm: Farm, make_writer: Any
) -> None:
    """What lets the MQTT client read in step with the commits: after a batch closed on its
    interval, the next one's close is told; after one closed on its size (a burst, where what
    is read sooner is committed sooner), it is not."""
    writer = await make_writer(batch_interval=2.0, commit_rows=5)
    with writer.subscribe() as listener:
        assert writer.closes_at() is None  # no batch yet
        for ts in (T0, T0 + 1):  # two readings: the batch closes on its interval
            writer.submit(reading(farm.sensor, 6.0, ts))
        [await asyncio.wait_for(listener.get(), WAIT) for _ in range(2)]
        writer.submit(reading(farm.sensor, 6.0, T0 + 2))
        await asyncio.sleep(0.02)
        closes = writer.closes_at()
        assert closes is not None and closes > asyncio.get_running_loop().time()
        for ts in range(T0 + 3, T0 + 7):  # five in the batch: it closes on its size
            writer.submit(reading(farm.sensor, 6.0, ts))
        [await asyncio.wait_for(listener.get(), WAIT) for _ in range(5)]
        writer.submit(reading(farm.sensor, 6.0, T0 + 7))
        await asyncio.sleep(0.02)
        assert writer.closes_at() is None
        await asyncio.wait_for(listener.get(), WAIT)


@pytest.mark.parametrize(
    ("value", "valid_range", "reason"),
    [
        (float("nan"), None, "not_a_number"),
        (float("inf"), None, "infinite"),
        (float("-inf"), None, "infinite"),
        (15.2, (0.0, 14.0), "out_of_range"),
        (-0.1, (0.0, 14.0), "out_of_range"),
    ],
)
async def test_garbage_is_counted_and_never_stored(
    farm: Farm,
    make_writer: Any,
    value: float,
    valid_range: tuple[float, float] | None,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = await make_writer()
    for i in range(50):
        assert not writer.submit(reading(farm.sensor, value, T0 + i, valid_range=valid_range))
    assert writer.submit(reading(farm.sensor, 7.0, T0 + 100, valid_range=(0.0, 14.0)))
    await writer.flush()

    assert writer.stats.rejected == {reason: 50}
    assert [row[1] for row in await stored(farm, farm.sensor)] == [7.0]
    logged = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert len(logged) == 1, "rejections of one series are logged at a limited rate"


async def test_a_caller_passing_a_non_number_is_rejected(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer()
    assert not writer.submit(reading(farm.sensor, "7.0"))  # type: ignore[arg-type]
    assert writer.stats.rejected == {"not_a_number": 1}


async def test_calibration_is_applied_and_the_raw_value_kept(farm: Farm, make_writer: Any) -> None:
    calibrations = {(farm.sensor, "ph"): LinearCalibration(slope=1.1, offset=-0.5)}
    writer = await make_writer(calibration=lambda d, m: calibrations.get((d, m)))
    writer.submit(reading(farm.sensor, 7.0, T0))
    writer.submit(reading(farm.other, 7.0, T0))
    # The range applies to the calibrated value: raw 13.0 reads 13.8, still in range; 14.0 not.
    writer.submit(reading(farm.sensor, 13.0, T0 + 1, valid_range=(0.0, 14.0)))
    writer.submit(reading(farm.sensor, 14.0, T0 + 2, valid_range=(0.0, 14.0)))
    await writer.flush()

    rows = await stored(farm, farm.sensor)
    assert [(ts, round(v, 6), raw) for ts, v, raw, _ in rows] == [
        (T0, 7.2, 7.0),
        (T0 + 1, 13.8, 13.0),
    ]
    assert await stored(farm, farm.other) == [(T0, 7.0, None, None)]
    assert writer.stats.rejected == {"out_of_range": 1}


async def test_a_failing_calibration_provider_stores_nothing_wrong(
    farm: Farm, make_writer: Any
) -> None:
    def broken(device_id: str, metric: str) -> LinearCalibration | None:
        raise KeyError(device_id)

    writer = await make_writer(calibration=broken)
    assert not writer.submit(reading(farm.sensor, 7.0))
    await writer.flush()
    assert writer.stats.rejected == {"calibration_error": 1}
    assert await stored(farm, farm.sensor) == []


async def test_device_time_is_used_and_receive_time_kept_when_skewed(
    farm: Farm, make_writer: Any
) -> None:
    writer = await make_writer(clock_skew_ms=2000)
    received = T0 + 10 * MIN
    writer.submit(reading(farm.sensor, 1.0, received, device_ts=received - 1500))  # within skew
    writer.submit(reading(farm.sensor, 2.0, received, device_ts=received - 5 * MIN))  # skewed
    writer.submit(reading(farm.sensor, 3.0, received + 7))  # no device time
    writer.submit(reading(farm.sensor, 4.0, received, device_ts=received + 2 * DAY))  # clock off
    await writer.flush()

    assert await stored(farm, farm.sensor) == [
        (received - 5 * MIN, 2.0, None, received),
        (received - 1500, 1.0, None, None),
        (received, 4.0, None, None),
        (received + 7, 3.0, None, None),
    ]
    assert writer.stats.device_clock_ahead == 1


async def test_readings_older_than_raw_retention_are_refused(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer(max_age_ms=30 * DAY)
    assert not writer.submit(reading(farm.sensor, 6.0, T0, device_ts=T0 - 31 * DAY))
    assert not writer.submit(reading(farm.sensor, 6.0, T0, device_ts=-5))
    assert writer.submit(reading(farm.sensor, 6.0, T0, device_ts=T0 - 29 * DAY))
    assert writer.stats.rejected == {"too_old": 1, "bad_timestamp": 1}


async def test_duplicates_are_stored_and_announced_once(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer()
    with writer.subscribe() as listener:
        for delay in (0, 5000):  # the same messages (device times), delivered again later
            writer.submit(reading(farm.sensor, 6.0, T0 + delay, device_ts=T0))
            writer.submit(reading(farm.sensor, 6.5, T0 + 1000 + delay, device_ts=T0 + 1000))
            await writer.flush()
        announced = [listener.get_nowait() for _ in range(listener.pending())]

    assert [r.ts for r in announced] == [T0, T0 + 1000]
    assert writer.stats.duplicates == 2 and writer.stats.committed == 2
    assert await count(farm.db, "readings") == 2


async def test_readings_of_a_deleted_device_do_not_fail_the_batch(
    farm: Farm, make_writer: Any
) -> None:
    writer = await make_writer()
    writer.submit(reading(farm.sensor, 6.0, T0))
    await writer.flush()  # the series id is now cached
    async with farm.db.transaction() as conn:
        await conn.execute("DELETE FROM devices WHERE id = ?", (farm.sensor,))

    writer.submit(reading(farm.sensor, 6.1, T0 + 1))
    writer.submit(reading(farm.other, 6.2, T0 + 1))
    writer.submit(reading("no-such-device", 6.3, T0 + 1))
    await writer.flush()

    assert writer.stats.unknown_device == 2
    assert await stored(farm, farm.other) == [(T0 + 1, 6.2, None, None)]
    assert await count(farm.db, "series") == 1


async def test_a_slow_listener_never_holds_up_ingest(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer()
    slow = writer.subscribe(maxsize=5)  # never read
    only_other = writer.subscribe(maxsize=1000, accept=lambda r: r.device_id == farm.other)
    fast = writer.subscribe(maxsize=1000)
    for i in range(100):
        writer.submit(reading(farm.sensor if i % 2 else farm.other, 6.0, T0 + i))
    await writer.flush()

    assert writer.stats.committed == 100
    assert fast.pending() == 100 and only_other.pending() == 50
    assert slow.pending() == 5 and slow.take_dropped() == 95 and slow.take_dropped() == 0
    assert writer.listeners.dropped == 95
    slow.close()
    assert len(writer.listeners) == 2


async def test_a_broken_listener_filter_does_not_stop_the_others(
    farm: Farm, make_writer: Any
) -> None:
    writer = await make_writer()
    writer.subscribe(accept=lambda r: 1 / 0 > 0)
    fine = writer.subscribe()
    writer.submit(reading(farm.sensor, 6.0))
    await writer.flush()
    assert fine.pending() == 1 and writer.listeners.filter_errors == 1


class FlakyStore(ReadingStore):
    """A real store whose first ``failures`` writes fail as if the disk hiccupped."""

    def __init__(self, db: Database, failures: int) -> None:
        super().__init__(db)
        self.failures = failures

    async def write(self, readings: Sequence[NewReading]) -> WriteOutcome:
        if self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("disk I/O error")
        return await super().write(readings)


async def test_a_failed_commit_is_retried(
    farm: Farm, make_writer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL)
    writer = await make_writer(store=FlakyStore(farm.db, failures=2), retry_delay=0.01)
    writer.submit(reading(farm.sensor, 6.0))
    await writer.flush()
    assert writer.stats.committed == 1 and writer.stats.commit_failures == 2

    broken = await make_writer(
        store=FlakyStore(farm.db, failures=99), retry_delay=0.01, commit_attempts=3
    )
    broken.submit(reading(farm.sensor, 6.0, T0 + 1))
    await broken.flush()
    assert broken.stats.lost == 1 and broken.stats.commit_failures == 3
    # The writer keeps going after a lost batch.
    broken.submit(reading(farm.sensor, 6.0, T0 + 2))
    await broken.flush()
    assert broken.stats.commit_failures == 6


async def test_queue_full_drops_and_counts(farm: Farm, make_writer: Any) -> None:
    writer = await make_writer(max_queue=10)
    accepted = writer.submit_many(reading(farm.sensor, 6.0, T0 + i) for i in range(15))
    await writer.flush()
    assert accepted == 10 and writer.stats.queue_full == 5
    assert await count(farm.db, "readings") == 10


async def test_measurements_from_the_codec_convert(farm: Farm) -> None:
    received = datetime(2024, 1, 1, 0, 0, 1, 999_999, tzinfo=UTC)
    item = incoming(farm.sensor, Measurement("ph", 6.2, "pH", received), to_ms(received), (0, 14))
    assert item.received_ts == item.device_ts == T0 + 1999 == to_ms(received)
    assert (item.metric, item.unit, item.valid_range) == ("ph", "pH", (0, 14))
    assert Resolution.MINUTE.step_ms == MIN


async def test_a_burst_received_in_one_millisecond_keeps_every_reading(
    farm: Farm, make_writer: Any
) -> None:
    writer = await make_writer()
    with writer.subscribe(maxsize=5000) as listener:
        # 1,000 distinct messages without a device time, all received in the same millisecond,
        # in batches of every size; then 1,000 more in that millisecond after the first commit.
        for value in range(1000):
            writer.submit(reading(farm.sensor, value / 100, T0))
        await writer.flush()
        for value in range(1000, 2000):
            writer.submit(reading(farm.sensor, value / 100, T0))
        await writer.flush()
        announced = [listener.get_nowait() for _ in range(listener.pending())]

    rows = await stored(farm, farm.sensor)
    assert sorted(round(v * 100) for _, v, _, _ in rows) == list(range(2000))
    assert len({ts for ts, _, _, _ in rows}) == 2000
    assert min(ts for ts, _, _, _ in rows) == T0
    assert len(announced) == 2000 and writer.stats.duplicates == 0
    assert await count(farm.db, "readings_1m") >= 1
    (n,) = await farm.db.fetch_one("SELECT sum(n) FROM readings_1m")  # type: ignore[misc]
    assert n == 2000


async def test_receive_stamps_stay_unique_across_a_restart(farm: Farm, make_writer: Any) -> None:
    first = await make_writer()
    first.submit_many(reading(farm.sensor, 1.0, T0) for _ in range(300))
    await first.flush()
    second = await make_writer(store=ReadingStore(farm.db))  # remembers only the database
    second.submit_many(reading(farm.sensor, 2.0, T0 + 100) for _ in range(300))
    await second.flush()

    rows = await stored(farm, farm.sensor)
    assert len(rows) == len({ts for ts, _, _, _ in rows}) == 600
    assert [v for _, v, _, _ in rows].count(2.0) == 300


async def test_a_redelivered_message_with_a_far_off_clock_is_stored_once(
    farm: Farm, make_writer: Any
) -> None:
    writer = await make_writer()
    ahead = T0 + 400 * DAY
    for received in (T0, T0, T0 + 9000):  # a burst, then the same messages re-delivered
        for i in range(50):
            writer.submit(reading(farm.sensor, 7.0, received, device_ts=ahead + i * 1000))
        await writer.flush()
    # A different value at a device time already seen is a different message.
    writer.submit(reading(farm.sensor, 7.5, T0 + 9000, device_ts=ahead))
    await writer.flush()

    rows = await stored(farm, farm.sensor)
    assert len(rows) == 51
    assert all(T0 <= ts < T0 + 10_000 for ts, _, _, _ in rows)  # stamped on receipt
    assert writer.stats.duplicates == 100
