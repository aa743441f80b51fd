"""Queries pick the finest resolution that fits the point budget and holds the whole range."""

from __future__ import annotations

import pytest

from agent.services.readings.query import ReadingQuery, SeriesData
from agent.services.readings.retention import ReadingRetention, RetentionPolicy
from agent.store.readings import Resolution
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import Role
from tests.agent.readings.conftest import DAY, HOUR, MIN, T0, Farm, readings
from tests.support.reading_seed import add_user, grant

SECOND = 1000
POLICY = RetentionPolicy()  # raw 30 days, 1-minute a year, hourly forever


def query(farm: Farm, now: int, policy: RetentionPolicy = POLICY) -> ReadingQuery:
    """A query service whose clock reads ``now``."""
    return ReadingQuery(farm.db, farm.store, policy, now=lambda: now)


async def fill(farm: Farm, start: int, step: int, n: int) -> list[float]:
    """``n`` readings of the sensor from ``start`` every ``step`` ms; returns the values."""
    values = [float(i % 97) for i in range(n)]
    stamps = [start + i * step for i in range(n)]
    for at in range(0, n, 5000):
        await farm.store.write(
            readings(farm.sensor, stamps[at : at + 5000], values[at : at + 5000])
        )
    return values


async def fetch(farm: Farm, now: int, start: int, end: int, budget: int) -> SeriesData:
    return await query(farm, now).series(farm.admin, farm.sensor, "ph", start, end, budget)


async def test_a_range_that_fits_returns_raw_readings(farm: Farm) -> None:
    values = await fill(farm, T0, 10 * SECOND, 100)
    data = await fetch(farm, T0 + DAY, T0, T0 + HOUR, 1000)
    assert (data.resolution, data.bucket_ms, data.unit) == (Resolution.RAW, 0, "pH")
    assert [p.mean for p in data.points] == values
    assert all(p.count == 1 and p.min == p.max == p.mean for p in data.points)


async def test_a_day_of_ten_second_readings_steps_through_the_resolutions(farm: Farm) -> None:
    values = await fill(farm, T0, 10 * SECOND, 8640)
    now = T0 + DAY

    everything = await fetch(farm, now, T0, T0 + DAY, 10_000)
    assert (everything.resolution, len(everything.points)) == (Resolution.RAW, 8640)

    minutes = await fetch(farm, now, T0, T0 + DAY, 2000)
    assert (minutes.resolution, minutes.bucket_ms, len(minutes.points)) == (
        Resolution.MINUTE,
        0,
        1440,
    )

    buckets = await fetch(farm, now, T0, T0 + DAY, 1000)
    assert (buckets.resolution, buckets.bucket_ms, len(buckets.points)) == (
        Resolution.MINUTE,
        2 * MIN,
        720,
    )
    first = buckets.points[0]
    assert first.count == 12 and first.min == min(values[:12]) and first.max == max(values[:12])
    assert first.mean == pytest.approx(sum(values[:12]) / 12)
    assert sum(p.count for p in buckets.points) == 8640


async def test_a_short_dense_range_is_bucketed_below_a_minute(farm: Farm) -> None:
    await fill(farm, T0, SECOND, 1800)
    data = await fetch(farm, T0 + HOUR, T0, T0 + 30 * MIN, 1000)
    assert (data.resolution, data.bucket_ms, len(data.points)) == (Resolution.RAW, 2000, 900)
    assert {p.count for p in data.points} == {2}


async def test_a_year_is_bucketed_from_the_hourly_rollup(farm: Farm) -> None:
    await fill(farm, T0, HOUR, 366 * 24)
    data = await fetch(farm, T0 + 366 * DAY, T0, T0 + 366 * DAY, 1000)
    assert (data.resolution, data.bucket_ms) == (Resolution.HOUR, 12 * HOUR)
    assert len(data.points) == 732 and {p.count for p in data.points} == {12}


@pytest.mark.parametrize("budget", [10, 37, 100, 999, 5000])
async def test_the_point_budget_is_never_exceeded(farm: Farm, budget: int) -> None:
    await fill(farm, T0 + 7 * SECOND, 37 * SECOND, 30_000)  # ~12.8 days, unaligned
    spans = [5 * MIN, HOUR + 1, 7 * HOUR, DAY, 5 * DAY + 13, 13 * DAY, 400 * DAY]
    for span in spans:
        for offset in (0, 13 * MIN + 1234):
            start = T0 + offset
            data = await fetch(farm, T0 + 14 * DAY, start, start + span, budget)
            assert len(data.points) <= budget, (span, offset, data.resolution, data.bucket_ms)
            assert data.points, (span, offset)


async def test_pruned_raw_readings_are_read_from_the_rollups(farm: Farm) -> None:
    await fill(farm, T0, 10 * SECOND, 360)  # one hour
    now = T0 + 40 * DAY
    # Not pruned yet: the raw rows are still whole, so raw is used although past retention.
    assert (await fetch(farm, now, T0, T0 + HOUR, 1000)).resolution is Resolution.RAW

    await ReadingRetention(farm.store, POLICY, now=lambda: now).run()

    data = await fetch(farm, now, T0, T0 + HOUR, 1000)
    assert (data.resolution, data.bucket_ms, len(data.points)) == (Resolution.MINUTE, 0, 60)
    assert sum(p.count for p in data.points) == 360


async def test_unknown_metric_is_empty(farm: Farm) -> None:
    data = await query(farm, T0).series(farm.admin, farm.sensor, "ec", T0, T0 + HOUR)
    assert data.points == [] and data.unit == ""


async def test_only_visible_devices_can_be_read(farm: Farm) -> None:
    await fill(farm, T0, MIN, 10)
    service = query(farm, T0 + DAY)
    stranger = await add_user(farm.db, Role.ANALYST)
    with pytest.raises(NotFound):
        await service.series(stranger, farm.sensor, "ph", T0, T0 + HOUR)
    with pytest.raises(NotFound):
        await service.series(farm.admin, "no-such-device", "ph", T0, T0 + HOUR)

    await grant(farm.db, stranger, farm.farm_id, "read_only")
    data = await service.series(stranger, farm.sensor, "ph", T0, T0 + HOUR)
    assert len(data.points) == 10


async def test_bad_ranges_and_budgets_are_validation_errors(farm: Farm) -> None:
    service = query(farm, T0)
    with pytest.raises(ValidationFailed):
        await service.series(farm.admin, farm.sensor, "ph", T0, T0)
    with pytest.raises(ValidationFailed):
        await service.series(farm.admin, farm.sensor, "ph", T0, T0 + HOUR, budget=5)
    with pytest.raises(ValidationFailed):
        await service.series(farm.admin, farm.sensor, "ph", T0, T0 + HOUR, budget=10**6)


async def test_metrics_of_one_device_share_a_resolution_within_budget(farm: Farm) -> None:
    await fill(farm, T0, 10 * SECOND, 8640)  # dense pH
    await farm.store.write(
        readings(farm.sensor, [T0 + i * HOUR for i in range(24)], [20.0] * 24, "temperature")
    )
    service = query(farm, T0 + DAY)

    found = await service.read(farm.sensor, None, T0, T0 + DAY, 1000)

    assert [d.metric for d in found] == ["ph", "temperature"]
    assert {(d.resolution, d.bucket_ms) for d in found} == {(Resolution.MINUTE, 2 * MIN)}
    assert [len(d.points) for d in found] == [720, 24]
    sparse_alone = await service.read(farm.sensor, ["temperature", "ec"], T0, T0 + DAY, 1000)
    assert sparse_alone[0].resolution is Resolution.RAW and sparse_alone[1].points == []
