"""Rollups agree with the raw readings, however the readings arrive."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping

from agent.store.readings import Resolution
from tests.agent.readings.conftest import HOUR, MIN, T0, Farm, readings


async def rollup(farm: Farm, resolution: Resolution) -> dict[int, tuple[float, float, float, int]]:
    """The rollup rows of the farm's sensor: bucket -> (min, max, mean, count)."""
    info = await farm.store.find_series(farm.sensor, "ph")
    assert info is not None
    points = await farm.store.points(info.id, resolution, 0, 2**62)
    return {p.ts: (p.min, p.max, p.mean, p.count) for p in points}


def expected(stamps: list[int], values: list[float], step: int) -> dict[int, tuple[float, ...]]:
    """Rollups recomputed from scratch."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for ts, value in zip(stamps, values, strict=True):
        buckets[ts - ts % step].append(value)
    return {b: (min(v), max(v), sum(v) / len(v), len(v)) for b, v in buckets.items()}


def assert_rollups_match(
    actual: Mapping[int, tuple[float, ...]], wanted: Mapping[int, tuple[float, ...]]
) -> None:
    """Same buckets, same min, max and count, means equal to rounding."""
    assert actual.keys() == wanted.keys()
    for bucket, (lo, hi, mean, n) in wanted.items():
        got = actual[bucket]
        assert got[0] == lo and got[1] == hi and got[3] == n, bucket
        assert abs(got[2] - mean) < 1e-9, bucket


async def test_minute_and_hour_rollups_span_boundaries(farm: Farm) -> None:
    # 59:50 .. 01:00:10 crosses both a minute and an hour boundary.
    stamps = [T0 + HOUR - 10_000, T0 + HOUR - 1, T0 + HOUR, T0 + HOUR + 10_000, T0 + HOUR + MIN]
    values = [6.0, 7.5, 5.0, 6.5, 8.0]
    await farm.store.write(readings(farm.sensor, stamps, values))

    minutes = await rollup(farm, Resolution.MINUTE)
    assert minutes == {
        T0 + HOUR - MIN: (6.0, 7.5, 6.75, 2),
        T0 + HOUR: (5.0, 6.5, 5.75, 2),
        T0 + HOUR + MIN: (8.0, 8.0, 8.0, 1),
    }
    hours = await rollup(farm, Resolution.HOUR)
    assert hours == {T0: (6.0, 7.5, 6.75, 2), T0 + HOUR: (5.0, 8.0, 6.5, 3)}


async def test_late_and_out_of_order_batches_give_the_same_rollups(farm: Farm) -> None:
    rng = random.Random(7)
    stamps = sorted(rng.sample(range(T0, T0 + 3 * HOUR, 1000), 600))
    values = [round(rng.uniform(4, 8), 2) for _ in stamps]
    pairs = list(zip(stamps, values, strict=True))
    rng.shuffle(pairs)  # late readings land in buckets that already have rows
    for start in range(0, len(pairs), 37):
        chunk = pairs[start : start + 37]
        await farm.store.write(readings(farm.sensor, [p[0] for p in chunk], [p[1] for p in chunk]))

    assert_rollups_match(await rollup(farm, Resolution.MINUTE), expected(stamps, values, MIN))
    assert_rollups_match(await rollup(farm, Resolution.HOUR), expected(stamps, values, HOUR))


async def test_duplicate_timestamps_are_idempotent(farm: Farm) -> None:
    first = await farm.store.write(readings(farm.sensor, [T0, T0 + 1000], [6.0, 7.0]))
    # Re-delivery (MQTT QoS 1) of one reading, and a duplicate inside one batch.
    again = await farm.store.write(
        readings(farm.sensor, [T0 + 1000, T0 + 2000, T0 + 2000], [9.0, 5.0, 9.0])
    )

    assert len(first.inserted) == 2 and first.duplicates == 0
    assert [r.ts for r in again.inserted] == [T0 + 2000] and again.duplicates == 2
    # First write wins, and the rollup counts each timestamp once.
    assert await rollup(farm, Resolution.MINUTE) == {T0: (5.0, 7.0, 6.0, 3)}
    info = await farm.store.find_series(farm.sensor, "ph")
    assert info is not None
    raw = await farm.store.points(info.id, Resolution.RAW, T0, T0 + MIN)
    assert [(p.ts, p.mean) for p in raw] == [(T0, 6.0), (T0 + 1000, 7.0), (T0 + 2000, 5.0)]


async def test_series_are_per_device_and_metric(farm: Farm) -> None:
    await farm.store.write(
        [
            *readings(farm.sensor, [T0], [6.0]),
            *readings(farm.sensor, [T0], [21.5], metric="temperature"),
            *readings(farm.other, [T0], [6.5]),
        ]
    )
    metrics = [s.metric for s in await farm.store.series_of(farm.sensor)]
    assert metrics == ["ph", "temperature"]
    other = await farm.store.find_series(farm.other, "ph")
    assert other is not None and other.device_id == farm.other
