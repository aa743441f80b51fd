"""Farm-wide metrics: exact window aggregates and latest values, for visible farms only."""

from __future__ import annotations

import pytest

from agent.services.readings.query import ReadingQuery
from agent.services.readings.retention import RetentionPolicy
from agent.store.reading_windows import ReadingWindows
from protocol.errors import Forbidden, NotFound
from protocol.identity import Role
from tests.agent.readings.conftest import HOUR, MIN, T0, Farm, readings
from tests.support.reading_seed import add_device, add_farm, add_user, grant

# Every 10 minutes for 3 hours; the window cuts both ends mid-hour.
STAMPS = [T0 + i * 10 * MIN for i in range(19)]
START, END = T0 + 30 * MIN, T0 + 2 * HOUR + 30 * MIN


def window(stamps: list[int], values: list[float]) -> list[float]:
    return [v for ts, v in zip(stamps, values, strict=True) if START <= ts < END]


@pytest.fixture
async def service(farm: Farm) -> ReadingQuery:
    return ReadingQuery(farm.db, farm.store, RetentionPolicy(), now=lambda: T0 + 4 * HOUR)


async def test_metrics_aggregate_a_farms_sensors_exactly(farm: Farm, service: ReadingQuery) -> None:
    ph_a = [6.0 + i / 10 for i in range(19)]
    ph_b = [5.0 + i / 20 for i in range(19)]
    temp = [20.0 + i for i in range(19)]
    await farm.store.write(
        [
            *readings(farm.sensor, STAMPS, ph_a),
            *readings(farm.other, STAMPS, ph_b),
            *readings(farm.sensor, STAMPS, temp, metric="temperature"),
        ]
    )
    # A sensor on another farm never counts.
    elsewhere = await add_device(farm.db, await add_farm(farm.db, farm.admin))
    await farm.store.write(readings(elsewhere, STAMPS, [99.0] * 19))

    result = await service.farm_metrics(farm.admin, farm.farm_id, START, END)

    by_metric = {m.metric: m for m in result.metrics}
    assert set(by_metric) == {"ph", "temperature"}
    ph = by_metric["ph"]
    in_window = window(STAMPS, ph_a) + window(STAMPS, ph_b)
    assert (ph.sensors, ph.count) == (2, len(in_window)) == (2, 24)
    assert (ph.min, ph.max) == (min(in_window), max(in_window))
    assert ph.mean == pytest.approx(sum(in_window) / len(in_window))
    assert ph.latest_mean == pytest.approx((ph_a[-1] + ph_b[-1]) / 2)
    assert ph.latest_ts == STAMPS[-1]
    temperature = by_metric["temperature"]
    assert temperature.mean == pytest.approx(sum(window(STAMPS, temp)) / 12)
    assert len(result.series) == 3


async def test_a_window_shorter_than_an_hour_uses_minutes(
    farm: Farm, service: ReadingQuery
) -> None:
    await farm.store.write(readings(farm.sensor, STAMPS, [float(i) for i in range(19)]))
    result = await service.farm_metrics(farm.admin, farm.farm_id, T0 + 55 * MIN, T0 + 75 * MIN)
    (ph,) = result.metrics
    assert (ph.count, ph.min, ph.max) == (2, 6.0, 7.0)


async def test_a_sensor_without_readings_in_the_window_still_shows_its_latest(
    farm: Farm, service: ReadingQuery
) -> None:
    await farm.store.write(readings(farm.sensor, [T0], [6.5]))
    result = await service.farm_metrics(farm.admin, farm.farm_id, START, END)
    (ph,) = result.metrics
    assert (ph.count, ph.mean, ph.min, ph.latest_mean) == (0, None, None, 6.5)


async def test_metrics_respect_visibility_and_role(farm: Farm, service: ReadingQuery) -> None:
    await farm.store.write(readings(farm.sensor, STAMPS, [6.0] * 19))
    other_farm = await add_farm(farm.db, farm.admin)
    await farm.store.write(readings(await add_device(farm.db, other_farm), STAMPS, [7.0] * 19))
    analyst = await add_user(farm.db, Role.ANALYST)
    await grant(farm.db, analyst, farm.farm_id, "read_only")

    with pytest.raises(NotFound):
        await service.farm_metrics(analyst, other_farm, START, END)
    everywhere = await service.farm_metrics(analyst, None, START, END)
    assert [s.device_id for s in everywhere.series] == [farm.sensor]
    assert len((await service.farm_metrics(farm.admin, None, START, END)).series) == 2

    plain_user = await add_user(farm.db, Role.USER)
    await grant(farm.db, plain_user, farm.farm_id, "read_write")
    with pytest.raises(Forbidden):
        await service.farm_metrics(plain_user, farm.farm_id, START, END)
    with pytest.raises(Forbidden):
        await service.farm_metrics(plain_user, None, START, END)


async def test_latest_reading_per_device(farm: Farm) -> None:
    await farm.store.write(
        [
            *readings(farm.sensor, [T0, T0 + 5], [1.0, 2.0]),
            *readings(farm.sensor, [T0 + 9], [3.0], metric="temperature"),
        ]
    )
    latest = await ReadingWindows(farm.db).latest_of_devices([farm.sensor, farm.other])
    assert latest == {farm.sensor: T0 + 9}
