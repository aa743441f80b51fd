"""GET /api/v1/sensors/{id}/data: ranges, metrics, and the resolution chosen for a point budget
from raw readings and the 1-minute and 1-hour rollups the mirror holds (docs/design.md 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from protocol.schemas.sensors import SensorData
from protocol.timefmt import iso
from tests.cloud.api.conftest import Cloud, Conn, World, assert_error
from tests.cloud.seed import T0


async def add_readings(
    system: Conn, tree: Any, metric: str, points: list[tuple[datetime, float]], unit: str = "%"
) -> None:
    await system.executemany(
        "INSERT INTO readings (device_id, farm_id, metric, ts, value, unit)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [(tree.device_id, tree.farm_id, metric, ts, value, unit) for ts, value in points],
    )


async def add_rollups(
    system: Conn, tree: Any, metric: str, resolution: str, buckets: list[datetime], mean: float
) -> None:
    count = 60 if resolution == "1m" else 3600
    await system.executemany(
        "INSERT INTO rollups (device_id, farm_id, metric, resolution, bucket, min, max, mean,"
        " count, unit) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '%')",
        [
            (tree.device_id, tree.farm_id, metric, resolution, b, mean - 5, mean + 5, mean, count)
            for b in buckets
        ],
    )


async def data(cloud: Cloud, token: str, sensor: UUID, **params: Any) -> tuple[int, Any]:
    return await cloud.get(f"/api/v1/sensors/{sensor}/data", token, **params)


async def test_a_short_range_answers_raw_readings(cloud: Cloud, world: World) -> None:
    token = await cloud.login("rita@example.com")
    status, body = await data(
        cloud,
        token,
        world.farm_a.device_id,
        start=iso(T0 - timedelta(minutes=1)),
        end=iso(T0 + timedelta(minutes=1)),
    )
    assert status == 200, body
    result = SensorData.model_validate(body)
    assert result.resolution == "raw"
    [series] = result.series
    assert (series.metric, series.unit) == ("temperature", "degC")
    assert [(p.timestamp, p.value, p.count) for p in series.points] == [
        ("2025-01-01T00:00:00.000Z", 21.0, 1),
        ("2025-01-01T00:00:01.000Z", 22.0, 1),
        ("2025-01-01T00:00:02.000Z", 23.0, 1),
    ]


async def test_over_budget_readings_come_as_minutes_from_rollups_and_raw_alike(
    cloud: Cloud, world: World, system: Conn
) -> None:
    # Ten minutes at 1 Hz. The agent's outbox overflowed for the first five: only their
    # 1-minute rollups reached the cloud; the last five arrived raw.
    t1 = T0 + timedelta(days=1)
    await add_rollups(
        system, world.farm_a, "humidity", "1m", [t1 + timedelta(minutes=m) for m in range(5)], 50
    )
    await add_readings(
        system,
        world.farm_a,
        "humidity",
        [(t1 + timedelta(minutes=5, seconds=s), float(s % 60)) for s in range(300)],
    )
    token = await cloud.login("will@example.com")
    status, body = await data(
        cloud,
        token,
        world.farm_a.device_id,
        metric="humidity",
        start=iso(t1),
        end=iso(t1 + timedelta(minutes=10)),
        max_points=100,
    )
    assert status == 200, body
    result = SensorData.model_validate(body)
    assert result.resolution == "1m"
    [series] = result.series
    assert [p.timestamp for p in series.points] == [
        iso(t1 + timedelta(minutes=m)) for m in range(10)
    ]
    assert {(p.value, p.min, p.max, p.count) for p in series.points[:5]} == {(50, 45, 55, 60)}
    assert {(p.value, p.min, p.max, p.count) for p in series.points[5:]} == {(29.5, 0, 59, 60)}


async def test_long_ranges_come_as_hours_merged_from_every_level(
    cloud: Cloud, world: World, system: Conn
) -> None:
    t2 = T0 + timedelta(days=10)
    tree = world.farm_a
    # Day one: hourly rollups, and two raw readings of its first hour that the agent sent raw
    # (an agent sends each reading once: raw, or inside one rollup).
    await add_rollups(system, tree, "co2", "1h", [t2 + timedelta(hours=h) for h in range(24)], 400)
    await add_readings(system, tree, "co2", [(t2, 1000.0), (t2 + timedelta(seconds=1), 1000.0)])
    # Two more hours as minute rollups, then raw readings not rolled up yet.
    minutes = [t2 + timedelta(hours=24, minutes=m) for m in range(120)]
    await add_rollups(system, tree, "co2", "1m", minutes, 600)
    hour_26 = t2 + timedelta(hours=26)
    await add_readings(
        system, tree, "co2", [(hour_26 + timedelta(minutes=i), 800.0 + i) for i in range(3)]
    )

    token = await cloud.login("alice@example.com")
    status, body = await data(
        cloud,
        token,
        tree.device_id,
        metric="co2",
        start=iso(t2 + timedelta(minutes=30)),  # not on an hour: the first bucket is aligned
        end=iso(t2 + timedelta(days=3)),
        max_points=100,
    )
    assert status == 200, body
    result = SensorData.model_validate(body)
    assert result.resolution == "1h"
    points = result.series[0].points
    assert len(points) == 27
    assert points[0].timestamp == iso(t2)
    assert points[0].count == 3602  # the rollup plus the raw readings of the same hour
    assert points[0].value == (400 * 3600 + 2 * 1000) / 3602
    assert {(p.value, p.min, p.max, p.count) for p in points[1:24]} == {(400, 395, 405, 3600)}
    assert [(p.timestamp, p.value, p.count) for p in points[24:26]] == [
        (iso(t2 + timedelta(hours=24)), 600, 3600),
        (iso(t2 + timedelta(hours=25)), 600, 3600),
    ]
    assert (points[26].timestamp, points[26].value, points[26].min, points[26].max) == (
        iso(hour_26),
        801,
        800,
        802,
    )
    assert points[26].count == 3


async def test_a_minute_part_rollup_part_raw_reads_whole(
    cloud: Cloud, world: World, system: Conn
) -> None:
    # The agent folded the first half of a minute into a rollup and sent the rest raw.
    t3 = T0 + timedelta(days=20)
    await system.execute(
        "INSERT INTO rollups (device_id, farm_id, metric, resolution, bucket, min, max, mean,"
        " count, unit) VALUES ($1, $2, 'ph', '1m', $3, 9, 11, 10, 30, '')",
        world.farm_a.device_id,
        world.farm_a.farm_id,
        t3,
    )
    await add_readings(
        system, world.farm_a, "ph", [(t3 + timedelta(seconds=30 + s), 20.0) for s in range(30)]
    )
    extra = [(t3 + timedelta(minutes=1, seconds=30 * i), 5.0) for i in range(300)]
    await add_readings(system, world.farm_a, "ph", extra)
    token = await cloud.login("will@example.com")
    status, body = await data(
        cloud,
        token,
        world.farm_a.device_id,
        metric="ph",
        start=iso(t3),
        end=iso(t3 + timedelta(hours=4)),
        max_points=250,
    )
    assert status == 200, body
    result = SensorData.model_validate(body)
    assert result.resolution == "1m"
    first = result.series[0].points[0]
    assert (first.timestamp, first.count, first.value, first.min, first.max) == (
        iso(t3),
        60,
        15,
        9,
        20,
    )


async def test_every_metric_of_the_sensor_by_default(
    cloud: Cloud, world: World, system: Conn
) -> None:
    await add_readings(system, world.farm_a, "humidity", [(T0, 55.0)])
    token = await cloud.login("admin@example.com")
    status, body = await data(
        cloud, token, world.farm_a.device_id, start=iso(T0), end=iso(T0 + timedelta(seconds=2))
    )
    assert status == 200
    assert [(s["metric"], s["unit"], len(s["points"])) for s in body["series"]] == [
        ("humidity", "%", 1),
        ("temperature", "degC", 2),  # end is exclusive
    ]


async def test_the_default_range_is_the_last_day(cloud: Cloud, world: World, system: Conn) -> None:
    now = datetime.now(UTC)
    await add_readings(
        system,
        world.farm_b,
        "temperature",
        [(now - timedelta(hours=1), 20.5), (now - timedelta(days=2), 99.0)],
        unit="degC",
    )
    token = await cloud.login("bob@example.com")
    status, body = await data(cloud, token, world.farm_b.device_id, metric="temperature")
    assert status == 200
    assert [p["value"] for p in body["series"][0]["points"]] == [20.5]


async def test_sensors_the_caller_may_not_see_are_404(
    cloud: Cloud, world: World, system: Conn
) -> None:
    fan = await system.fetchval(
        "INSERT INTO devices (farm_id, name, kind, device_type) VALUES ($1, 'Fan', 'fan', 'fan')"
        " RETURNING id",
        world.farm_a.farm_id,
    )
    for email, sensor in (
        ("bob@example.com", world.farm_a.device_id),
        ("nora@example.com", world.farm_a.device_id),
        ("admin@example.com", uuid4()),
        ("admin@example.com", fan),  # a device, but not a sensor
    ):
        status, body = await data(cloud, await cloud.login(email), sensor)
        assert status == 404, email
        assert_error(body, "RESOURCE_NOT_FOUND")


async def test_bad_ranges_and_budgets_are_422(cloud: Cloud, world: World) -> None:
    token = await cloud.login("admin@example.com")
    sensor = world.farm_a.device_id
    future = iso(datetime.now(UTC) + timedelta(days=1))
    for params in (
        {"start": iso(T0), "end": iso(T0)},
        {"start": future},  # ends now by default: before it starts
        {"start": iso(T0), "end": iso(T0 + timedelta(days=500))},
        {"start": "2025-01-01T00:00:00"},  # no time zone
        {"max_points": 0},
        {"metric": "Temp; DROP"},
    ):
        status, body = await data(cloud, token, sensor, **params)
        assert status == 422, params
        assert_error(body, "VALIDATION_ERROR")
    status, body = await cloud.get("/api/v1/sensors/123/data", token)
    assert status == 422


async def test_ranges_past_the_raw_retention_answer_from_the_rollups(
    make_cloud: Any, world: World, system: Conn
) -> None:
    # Raw readings of old months are dropped by retention; their minutes and hours stay.
    cloud = await make_cloud(readings_retention_days=30)
    old = datetime.now(UTC).replace(microsecond=0) - timedelta(days=90)
    await add_readings(
        system, world.farm_a, "ph", [(old + timedelta(seconds=10 * s), 6.0) for s in range(12)]
    )
    await system.execute("DELETE FROM readings WHERE metric = 'ph'")  # as a dropped partition
    token = await cloud.login("rita@example.com")
    status, body = await data(
        cloud,
        token,
        world.farm_a.device_id,
        metric="ph",
        start=iso(old - timedelta(minutes=1)),
        end=iso(old + timedelta(minutes=3)),
    )
    assert status == 200, body
    result = SensorData.model_validate(body)
    assert result.resolution == "1m"
    assert sum(p.count for p in result.series[0].points) == 12


async def test_points_keep_every_digit_and_millisecond(
    cloud: Cloud, world: World, system: Conn
) -> None:
    # Points are rendered as JSON by the database: values must come out exactly (shortest
    # round-trip form), timestamps to the millisecond, and a unit needing escapes stays valid.
    at = T0 + timedelta(hours=3, milliseconds=7)
    values = [0.1 + 0.2, -1234.5678901234, 1e-7]
    await add_readings(
        system, world.farm_a, "ec", [(at + timedelta(seconds=n), v) for n, v in enumerate(values)],
        unit='µS/"cm"',
    )  # fmt: skip
    token = await cloud.login("rita@example.com")
    status, body = await data(
        cloud, token, world.farm_a.device_id, metric="ec",
        start=iso(at - timedelta(seconds=1)), end=iso(at + timedelta(minutes=1)),
    )  # fmt: skip
    assert status == 200, body
    [series] = SensorData.model_validate(body).series
    assert series.unit == 'µS/"cm"'
    assert [(p.timestamp, p.value, p.min, p.max) for p in series.points] == [
        (iso(at + timedelta(seconds=n)), v, v, v) for n, v in enumerate(values)
    ]
