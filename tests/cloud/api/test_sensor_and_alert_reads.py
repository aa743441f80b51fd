"""GET /api/v1/sensors, /sensors/metrics and /alerts over the mirror: the agent's shapes
(protocol/schemas), each user seeing what row-level security lets them see."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

from protocol.schemas.alerts import AlertList
from protocol.schemas.sensors import SensorList, SensorMetrics
from protocol.timefmt import iso
from tests.cloud.api.conftest import USERS, Cloud, Conn, World, assert_error, expected_farms
from tests.cloud.seed import T0


async def tokens_of(cloud: Cloud) -> dict[str, str]:
    return {name: await cloud.login(World.email(name)) for name in USERS}


async def test_sensors_follow_farm_visibility_and_filters(
    cloud: Cloud, world: World, system: Conn
) -> None:
    await system.execute(
        "INSERT INTO devices (farm_id, name, kind, device_type, status, firmware_profile)"
        " VALUES ($1, 'pH probe', 'sensor', 'ph', 'offline', 'ezo_ph'),"
        " ($1, 'Fan 1', 'fan', 'fan', 'online', NULL)",
        world.farm_a.farm_id,
    )
    tokens = await tokens_of(cloud)
    for name, token in tokens.items():
        status, body = await cloud.get("/api/v1/sensors", token)
        assert status == 200, body
        listed = SensorList.model_validate(body)
        assert {s.farm_id for s in listed.sensors} == expected_farms(world)[name], name
        assert listed.total == len(listed.sensors)

    status, body = await cloud.get(
        "/api/v1/sensors", tokens["rita"], farm_id=str(world.farm_a.farm_id)
    )
    assert [(s["name"], s["status"], s["profile"]) for s in body["sensors"]] == [
        ("Climate sensor", "online", None),
        ("pH probe", "offline", "ezo_ph"),
    ]  # the fan is a device, not a sensor
    status, body = await cloud.get("/api/v1/sensors", tokens["admin"], status="offline")
    assert [s["name"] for s in body["sensors"]] == ["pH probe"]
    status, body = await cloud.get("/api/v1/sensors", tokens["admin"], limit=1, offset=1)
    assert (len(body["sensors"]), body["total"]) == (1, 3)
    status, body = await cloud.get(
        "/api/v1/sensors", tokens["alice"], farm_id=str(world.farm_b.farm_id)
    )
    assert status == 404
    assert_error(body, "RESOURCE_NOT_FOUND")


async def test_sensor_metrics_aggregate_a_farms_readings_in_range(
    cloud: Cloud, world: World, system: Conn
) -> None:
    farm = world.farm_a
    probe: UUID = await system.fetchval(
        "INSERT INTO devices (farm_id, name, kind, device_type, status)"
        " VALUES ($1, 'Second', 'sensor', 'temperature_humidity', 'offline') RETURNING id",
        farm.farm_id,
    )
    await system.executemany(
        "INSERT INTO readings (device_id, farm_id, metric, ts, value, unit)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [
            (probe, farm.farm_id, "temperature", T0 + timedelta(seconds=1), 30.0, "degC"),
            (probe, farm.farm_id, "humidity", T0, 60.0, "%"),
            # outside the range asked for below: not counted
            (probe, farm.farm_id, "temperature", T0 + timedelta(hours=2), 99.0, "degC"),
        ],
    )
    tokens = await tokens_of(cloud)
    params = {
        "farm_id": str(farm.farm_id),
        "start": iso(T0),
        "end": iso(T0 + timedelta(hours=1)),
    }
    status, body = await cloud.get("/api/v1/sensors/metrics", tokens["will"], **params)
    assert status == 200, body
    metrics = SensorMetrics.model_validate(body)
    assert (metrics.total_sensors, metrics.online_sensors, metrics.offline_sensors) == (2, 1, 1)
    by_metric = {m.metric: m for m in metrics.metrics}
    # The seeded sensor reads 21, 22, 23 degC at T0..T0+2s; the second one 30.
    temperature = by_metric["temperature"]
    assert (temperature.sensor_count, temperature.count) == (2, 4)
    assert (temperature.min, temperature.max, temperature.unit) == (21.0, 30.0, "degC")
    assert temperature.mean == (21 + 22 + 23 + 30) / 4
    assert (by_metric["humidity"].count, by_metric["humidity"].unit) == (1, "%")

    # rita reads farm A but her role has no metrics permission; bob cannot see farm A at all.
    status, body = await cloud.get("/api/v1/sensors/metrics", tokens["rita"], **params)
    assert status == 403
    status, body = await cloud.get("/api/v1/sensors/metrics", tokens["bob"], **params)
    assert status == 404
    status, body = await cloud.get("/api/v1/sensors/metrics", tokens["will"])
    assert status == 422  # farm_id is required


def alert_row(tree: Any, **changes: Any) -> dict[str, Any]:
    """An alert row as the agent's AlertEvaluator records it in an event's data."""
    row = {
        "id": str(uuid4()),
        "rule_id": str(uuid4()),
        "farm_id": str(tree.farm_id),
        "device_id": str(tree.device_id),
        "metric": "temperature",
        "direction": "above",
        "threshold": 28.0,
        "severity": "warning",
        "state": "active",
        "raised_at": "2025-01-01T01:00:00.000Z",
        "raised_value": 29.5,
        "cleared_at": None,
        "cleared_value": None,
        "cleared_reason": None,
    }
    row.update(changes)
    return row


async def add_alert_event(system: Conn, tree: Any, kind: str, row: dict[str, Any]) -> None:
    """Mirror an alert_raised/alert_cleared event as the sync applies it."""
    await system.execute(
        "INSERT INTO events (farm_id, device_id, kind, severity, message, data, ts)"
        " VALUES ($1, $2, $3, 'warning', '', $4::text::jsonb, $5::text::timestamptz)",
        tree.farm_id,
        tree.device_id,
        kind,
        json.dumps(row),
        row["cleared_at"] or row["raised_at"],
    )


async def test_alerts_are_the_newest_state_of_each_mirrored_alert(
    cloud: Cloud, world: World, system: Conn
) -> None:
    a, b = world.farm_a, world.farm_b
    cleared = alert_row(a, raised_at="2025-01-01T00:30:00.000Z")
    await add_alert_event(system, a, "alert_raised", cleared)
    await add_alert_event(
        system,
        a,
        "alert_cleared",
        dict(
            cleared,
            state="cleared",
            cleared_at="2025-01-01T00:40:00.000Z",
            cleared_value=27.0,
            cleared_reason="back_inside",
        ),
    )
    active_a = alert_row(a)
    await add_alert_event(system, a, "alert_raised", active_a)
    active_b = alert_row(b, metric="humidity", direction="below", threshold=40.0)
    await add_alert_event(system, b, "alert_raised", active_b)

    tokens = await tokens_of(cloud)
    for name, token in tokens.items():
        status, body = await cloud.get("/api/v1/alerts", token, state="active")
        assert status == 200, body
        listed = AlertList.model_validate(body)
        assert {x.farm_id for x in listed.alerts} == expected_farms(world)[name], name

    status, body = await cloud.get("/api/v1/alerts", tokens["rita"], farm_id=str(a.farm_id))
    listed = AlertList.model_validate(body)
    assert [(x.id, x.state) for x in listed.alerts] == [
        (active_a["id"], "active"),
        (cleared["id"], "cleared"),
    ]  # newest raised first; the cleared one once, in its cleared state
    assert (listed.alerts[1].cleared_value, listed.alerts[1].cleared_reason) == (
        27.0,
        "back_inside",
    )
    status, body = await cloud.get("/api/v1/alerts", tokens["admin"], state="cleared")
    assert [x["id"] for x in body["alerts"]] == [cleared["id"]]
    status, body = await cloud.get("/api/v1/alerts", tokens["admin"], device_id=str(b.device_id))
    assert [x["id"] for x in body["alerts"]] == [active_b["id"]]
    status, body = await cloud.get("/api/v1/alerts", tokens["admin"], limit=1, offset=5)
    assert (body["alerts"], body["total"]) == ([], 3)
    status, body = await cloud.get("/api/v1/alerts", tokens["bob"], farm_id=str(a.farm_id))
    assert status == 404
    status, body = await cloud.get("/api/v1/alerts", tokens["admin"], state="snoozed")
    assert status == 422
    # Found by a word of their metric (or severity, or the sensor's name), as on the agent.
    status, body = await cloud.get("/api/v1/alerts", tokens["admin"], q="HUMID")
    assert [x["id"] for x in body["alerts"]] == [active_b["id"]] and body["total"] == 1
    status, body = await cloud.get("/api/v1/alerts", tokens["admin"], q="humid", offset=3)
    assert (body["alerts"], body["total"]) == ([], 1)
    status, body = await cloud.get("/api/v1/events", tokens["admin"], q="cleared")
    assert status == 200, body
    assert [e["kind"] for e in body["events"]] == ["alert_cleared"]
