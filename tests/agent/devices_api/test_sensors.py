"""The sensor view: list, readings and farm-wide metrics."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agent.services.devices.sensors import Aggregate, Series, SeriesPoint
from agent.services.readings.query import ReadingQuery
from agent.services.readings.retention import RetentionPolicy
from agent.services.readings.sensor_readings import SensorReadings
from agent.services.readings.writer import to_ms
from agent.store.readings import NewReading, ReadingStore
from agent.web.keys import DATABASE, DEVICES, SENSORS
from protocol.schemas.sensors import Resolution
from protocol.timefmt import iso, parse_iso, utcnow
from tests.agent.devices_api.conftest import (
    create_farm,
    error_of,
    login_as,
    register,
    tasmota_sensor,
)
from tests.conftest import Agent

Points = list[tuple[datetime, float]]


class RecordedReadings:
    """A ``ReadingsQuery`` answering from fixed readings ((device, metric) -> points).

    Most sensor view tests use this seam; the last test goes through the real readings store.
    """

    def __init__(self, readings: dict[tuple[str, str], Points]) -> None:
        self.readings = readings
        self.asked: list[tuple[str, Sequence[str] | None, datetime, datetime, int]] = []

    async def series(
        self,
        device_id: str,
        metrics: Sequence[str] | None,
        start: datetime,
        end: datetime,
        max_points: int,
    ) -> tuple[Resolution, Sequence[Series]]:
        self.asked.append((device_id, metrics, start, end, max_points))
        return "raw", [
            Series(
                metric,
                [SeriesPoint(at, v, v, v, 1) for at, v in sorted(points) if start <= at < end],
            )
            for (device, metric), points in sorted(self.readings.items())
            if device == device_id and (metrics is None or metric in metrics)
        ]

    async def aggregates(
        self, device_ids: Sequence[str], start: datetime, end: datetime
    ) -> Sequence[Aggregate]:
        values: dict[str, list[float]] = {}
        sensors: dict[str, set[str]] = {}
        for (device_id, metric), points in self.readings.items():
            for at, value in points:
                if device_id in device_ids and start <= at < end:
                    values.setdefault(metric, []).append(value)
                    sensors.setdefault(metric, set()).add(device_id)
        return [
            Aggregate(metric, len(sensors[metric]), len(v), min(v), max(v), sum(v) / len(v))
            for metric, v in sorted(values.items())
        ]


async def test_sensors_list_metrics_and_calibration(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    sht = await register(agent, tasmota_sensor(farm_id, calibration_data={"humidity_offset": 2}))
    ph = await register(
        agent,
        {
            "name": "Tank pH",
            "kind": "sensor",
            "farm_id": farm_id,
            "profile": "atlas-ezo-ph",
            "address": {"transport": "serial", "port": "/dev/ttyUSB3"},
        },
    )
    await register(
        agent,
        {
            "name": "Fan",
            "kind": "fan",
            "farm_id": farm_id,
            "profile": "esphome-fan",
            "address": {"transport": "mqtt", "topic_base": "fan"},
        },
    )
    resp = await agent.client.get(f"/api/v1/sensors?farm_id={farm_id}", headers=agent.auth())
    body = await resp.json()
    assert resp.status == 200 and body["total"] == 2, body
    sensors = {sensor["id"]: sensor for sensor in body["sensors"]}

    climate = sensors[sht["id"]]
    assert [(m["name"], m["unit"]) for m in climate["metrics"]] == [
        ("temperature", "°C"),
        ("humidity", "%"),
        ("dew_point", "°C"),
    ]
    assert climate["calibration"]["performed_by"] == "agent"
    assert climate["calibration"]["method"] == "offset"
    [active] = climate["calibration"]["active"]
    assert (active["metric"], active["method"]) == ("humidity", "agent_offset")

    tank = sensors[ph["id"]]
    assert tank["calibration"]["performed_by"] == "device"
    assert tank["calibration"]["points"] == ["mid", "low", "high"]
    assert (tank["calibration"]["min_points"], tank["calibration"]["max_points"]) == (1, 3)
    assert tank["calibration"]["active"] == []
    resp = await agent.client.get("/api/v1/sensors?device_type=ph_sensor", headers=agent.auth())
    assert [s["id"] for s in (await resp.json())["sensors"]] == [ph["id"]]


async def test_sensor_data_comes_from_the_readings_query(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    sensor = await register(agent, tasmota_sensor(farm_id))
    now = utcnow().replace(microsecond=0)
    readings = RecordedReadings(
        {
            (sensor["id"], "temperature"): [
                (now - timedelta(hours=2), 21.0),
                (now - timedelta(hours=1), 21.5),
            ],
            (sensor["id"], "humidity"): [
                (now - timedelta(hours=1), 60.0),
                (now - timedelta(days=2), 55.0),
            ],
        }
    )
    agent.client.app[SENSORS].attach(readings)

    resp = await agent.client.get(f"/api/v1/sensors/{sensor['id']}/data", headers=agent.auth())
    data = await resp.json()
    assert resp.status == 200, data
    assert data["sensor_id"] == sensor["id"] and data["resolution"] == "raw"
    span = parse_iso(data["end"]) - parse_iso(data["start"])
    assert span == timedelta(hours=24)  # the default range
    assert {s["metric"]: (s["unit"], len(s["points"])) for s in data["series"]} == {
        "humidity": ("%", 1),
        "temperature": ("°C", 2),
    }
    temperature = next(s for s in data["series"] if s["metric"] == "temperature")
    assert temperature["points"][0] == {
        "timestamp": iso(now - timedelta(hours=2)),
        "value": 21.0,
        "min": 21.0,
        "max": 21.0,
        "count": 1,
    }

    start, end = iso(now - timedelta(days=3)), iso(now)
    resp = await agent.client.get(
        f"/api/v1/sensors/{sensor['id']}/data",
        params={"start": start, "end": end, "metric": "humidity", "max_points": "10"},
        headers=agent.auth(),
    )
    data = await resp.json()
    assert resp.status == 200, data
    assert [s["metric"] for s in data["series"]] == ["humidity"]
    assert [p["value"] for p in data["series"][0]["points"]] == [55.0, 60.0]
    assert (data["start"], data["end"]) == (start, end)
    assert readings.asked[-1][1:] == (["humidity"], parse_iso(start), parse_iso(end), 10)

    for params in (
        {"metric": "ph"},  # not a metric of this sensor
        {"start": end, "end": start},
        {"start": "yesterday"},
        {"start": "2026-01-01T00:00:00"},  # no time zone
        {"max_points": "9"},
    ):
        resp = await agent.client.get(
            f"/api/v1/sensors/{sensor['id']}/data", params=params, headers=agent.auth()
        )
        await error_of(resp, 422)


async def test_farm_sensor_metrics(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    other_farm = await create_farm(agent, "Other")
    first = await register(agent, tasmota_sensor(farm_id))
    second = await register(
        agent, tasmota_sensor(farm_id, address={"transport": "mqtt", "topic_base": "row2"})
    )
    elsewhere = await register(
        agent, tasmota_sensor(other_farm, address={"transport": "mqtt", "topic_base": "other"})
    )
    await agent.client.app[DEVICES].record_availability(first["id"], True, utcnow())
    now = utcnow()
    recent = now - timedelta(hours=1)
    agent.client.app[SENSORS].attach(
        RecordedReadings(
            {
                (first["id"], "temperature"): [(recent, 20.0)],
                (first["id"], "humidity"): [(recent, 50.0)],
                (second["id"], "temperature"): [(recent, 24.0), (now - timedelta(days=3), 40.0)],
                (elsewhere["id"], "temperature"): [(recent, 99.0)],
            }
        )
    )
    resp = await agent.client.get(
        f"/api/v1/sensors/metrics?farm_id={farm_id}", headers=agent.auth()
    )
    body = await resp.json()
    assert resp.status == 200, body
    assert (body["total_sensors"], body["online_sensors"], body["offline_sensors"]) == (2, 1, 1)
    metrics = {m["metric"]: m for m in body["metrics"]}
    assert metrics["temperature"] == {
        "metric": "temperature",
        "unit": "°C",
        "sensor_count": 2,
        "count": 2,
        "min": 20.0,
        "max": 24.0,
        "mean": 22.0,
    }
    assert metrics["humidity"]["sensor_count"] == 1

    analyst = await login_as(agent, "analyst", farm_id, "read_only")
    resp = await agent.client.get(
        f"/api/v1/sensors/metrics?farm_id={farm_id}", headers=agent.auth(analyst)
    )
    assert resp.status == 200
    user = await login_as(agent, "user", farm_id, "read_only")
    resp = await agent.client.get(
        f"/api/v1/sensors/metrics?farm_id={farm_id}", headers=agent.auth(user)
    )
    await error_of(resp, 403)  # plain users monitor; metrics are for analysts and up
    resp = await agent.client.get("/api/v1/sensors/metrics", headers=agent.auth())
    error: dict[str, Any] = await error_of(resp, 422)
    assert error["details"]["errors"][0]["field"] == "query.farm_id"


async def test_sensor_views_read_the_readings_store(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    sensor = await register(agent, tasmota_sensor(farm_id))
    db = agent.client.app[DATABASE]
    store = ReadingStore(db)
    now = utcnow().replace(microsecond=0)
    await store.write(
        [
            NewReading(sensor["id"], "temperature", "°C", to_ms(now - timedelta(minutes=m)), v)
            for m, v in ((30, 20.0), (20, 21.0), (10, 22.0))
        ]
    )
    query = ReadingQuery(db, store, RetentionPolicy())
    agent.client.app[SENSORS].attach(SensorReadings(query))

    resp = await agent.client.get(
        f"/api/v1/sensors/{sensor['id']}/data?metric=temperature", headers=agent.auth()
    )
    data = await resp.json()
    assert resp.status == 200, data
    [series] = data["series"]
    assert (series["metric"], series["unit"]) == ("temperature", "°C")
    assert [p["value"] for p in series["points"]] == [20.0, 21.0, 22.0]
    assert series["points"][0]["timestamp"] == iso(now - timedelta(minutes=30))

    resp = await agent.client.get(
        f"/api/v1/sensors/metrics?farm_id={farm_id}", headers=agent.auth()
    )
    body = await resp.json()
    assert resp.status == 200, body
    [temperature] = body["metrics"]
    assert (temperature["count"], temperature["min"], temperature["max"]) == (3, 20.0, 22.0)
    assert temperature["mean"] == 21.0 and temperature["sensor_count"] == 1
