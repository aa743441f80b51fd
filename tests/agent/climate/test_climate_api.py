"""/api/v1/climate-control: settings, validation, access, history and the farm-status stream."""

from __future__ import annotations

import json
from typing import Any

from agent.web.keys import DATABASE
from tests.agent.climate.conftest import (
    ClimateAgentFactory,
    Clock,
    history,
    loop_of,
    settings_body,
    update,
)
from tests.agent.devices_api.conftest import create_farm, error_of, login_as, register
from tests.agent.runtime.conftest import eventually
from tests.agent.streams.helpers import expect, open_stream, subscribe
from tests.conftest import Agent


async def fan(agent: Agent, farm_id: str, base: str) -> str:
    """Register an ESPHome fan on the farm."""
    body = {
        "name": f"Fan {base}",
        "kind": "fan",
        "farm_id": farm_id,
        "profile": "esphome-fan",
        "address": {"transport": "mqtt", "topic_base": base},
    }
    return str((await register(agent, body))["id"])


async def sensor(agent: Agent, farm_id: str, base: str) -> str:
    """Register an ESPHome temperature/humidity sensor on the farm."""
    body = {
        "name": f"Sensor {base}",
        "kind": "sensor",
        "farm_id": farm_id,
        "profile": "esphome-sensor",
        "address": {"transport": "mqtt", "topic_base": base},
    }
    return str((await register(agent, body))["id"])


async def listing(agent: Agent, token: str | None = None, **params: str) -> dict[str, Any]:
    resp = await agent.client.get(
        "/api/v1/climate-control", params=params, headers=agent.auth(token)
    )
    body: dict[str, Any] = await resp.json()
    assert resp.status == 200, body
    return body


async def test_settings_are_saved_and_listed_with_live_state(
    make_climate_agent: ClimateAgentFactory,
) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    other_farm = await create_farm(agent, "South")
    fan_id = await fan(agent, farm_id, "fan1")
    body = settings_body(farm_id, [fan_id], co2={"target": 900, "band": 150})

    resp = await update(agent, body)
    saved = await resp.json()
    assert resp.status == 200, saved
    settings = saved["settings"]
    assert settings["temperature"] == {"target": 24.0, "band": 1.0}
    assert settings["co2"] == {"target": 900.0, "band": 150.0}
    assert settings["vpd"] is None
    assert settings["fan_ids"] == [fan_id]
    assert settings["sensor_device_ids"] is None
    assert saved["state"]["mode"] == "auto"
    assert saved["state"]["manual_hold"] is False

    listed = await listing(agent)
    by_farm = {item["farm_id"]: item for item in listed["climate_controls"]}
    assert by_farm[farm_id]["settings"]["id"] == settings["id"]
    assert by_farm[other_farm]["settings"] is None
    assert listed["total"] == 2

    # A second update replaces the farm's settings rather than adding another.
    resp = await update(agent, {**body, "mode": "manual"})
    assert resp.status == 200
    only = await listing(agent, farm_id=farm_id)
    assert [item["settings"]["mode"] for item in only["climate_controls"]] == ["manual"]


async def test_a_row_has_its_own_settings(make_climate_agent: ClimateAgentFactory) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    resp = await agent.client.post(
        "/api/v1/rows/",
        json={"farm_id": farm_id, "name": "Row 1", "position": 1},
        headers=agent.auth(),
    )
    assert resp.status == 201, await resp.text()
    row_id = (await resp.json())["id"]
    farm_fan, row_fan = await fan(agent, farm_id, "f1"), await fan(agent, farm_id, "f2")
    assert (await update(agent, settings_body(farm_id, [farm_fan]))).status == 200
    resp = await update(agent, settings_body(farm_id, [row_fan], row_id=row_id))
    assert resp.status == 200, await resp.text()

    listed = await listing(agent, farm_id=farm_id)
    assert [item["row_id"] for item in listed["climate_controls"]] == [None, row_id]

    # One fan cannot be driven by two loops.
    resp = await update(agent, settings_body(farm_id, [farm_fan], row_id=row_id))
    error = await error_of(resp, 422)
    assert error["details"]["errors"][0]["field"] == "fan_ids.0"


async def test_invalid_settings_are_refused(make_climate_agent: ClimateAgentFactory) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    other_farm = await create_farm(agent, "South")
    fan_id = await fan(agent, farm_id, "fan1")
    foreign_fan = await fan(agent, other_farm, "fan2")
    sensor_id = await sensor(agent, farm_id, "s1")

    cases: list[tuple[dict[str, Any], str]] = [
        (settings_body(farm_id, [foreign_fan]), "fan_ids.0"),
        (settings_body(farm_id, [sensor_id]), "fan_ids.0"),
        (settings_body(farm_id, [fan_id], sensor_device_ids=[fan_id]), "sensor_device_ids.0"),
        (settings_body(farm_id, [fan_id], temperature={"target": 80, "band": 1}), "temperature"),
        (settings_body(farm_id, [fan_id], humidity={"target": 60, "band": 0}), "humidity"),
        (settings_body(farm_id, [fan_id], failsafe_speed=101), "failsafe_speed"),
        (settings_body(farm_id, [fan_id], mode="off"), "mode"),
        (settings_body(farm_id, []), "fan_ids"),
        (settings_body(farm_id, [fan_id], heater=True), "heater"),
        (settings_body(farm_id, [fan_id], row_id=farm_id), "row_id"),
    ]
    for body, field in cases:
        error = await error_of(await update(agent, body), 422)
        fields = [issue["field"] for issue in error["details"]["errors"]]
        assert any(f.startswith(field) for f in fields), (field, fields)
    assert (await listing(agent, farm_id=farm_id))["climate_controls"][0]["settings"] is None


async def test_access_follows_role_and_farm_permission(
    make_climate_agent: ClimateAgentFactory,
) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "fan1")
    body = settings_body(farm_id, [fan_id])

    viewer = await login_as(agent, "user", farm_id, "read_write")
    await error_of(await update(agent, body, viewer), 403)
    read_only = await login_as(agent, "operator", farm_id, "read_only")
    await error_of(await update(agent, body, read_only), 403)
    stranger = await login_as(agent, "operator")
    await error_of(await update(agent, body, stranger), 404)
    resp = await agent.client.get(
        "/api/v1/climate-control/history",
        params={"farm_id": farm_id},
        headers=agent.auth(stranger),
    )
    await error_of(resp, 404)
    assert (await listing(agent, stranger))["climate_controls"] == []

    operator = await login_as(agent, "operator", farm_id, "read_write")
    assert (await update(agent, body, operator)).status == 200
    assert len((await listing(agent, viewer))["climate_controls"]) == 1


async def test_history_records_who_changed_what(make_climate_agent: ClimateAgentFactory) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "fan1")
    operator = await login_as(agent, "operator", farm_id, "read_write")
    assert (await update(agent, settings_body(farm_id, [fan_id]))).status == 200
    changed = settings_body(farm_id, [fan_id], temperature={"target": 22.5, "band": 0.5})
    assert (await update(agent, changed, operator)).status == 200

    entries = await history(agent, farm_id, kind="settings")
    assert [e["data"]["temperature_target"] for e in entries] == [22.5, 24.0]
    assert entries[0]["actor_email"].startswith("operator-")
    assert entries[1]["actor_email"] == "admin@farm.test"
    assert all(e["kind"] == "settings" for e in entries)


async def test_stale_sensors_fail_safe_is_in_history_and_on_the_stream(
    make_climate_agent: ClimateAgentFactory, clock: Clock
) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "fan1")
    await sensor(agent, farm_id, "s1")
    assert (await update(agent, settings_body(farm_id, [fan_id]))).status == 200
    ws = await open_stream(agent, "farm-status")
    await subscribe(ws, farm_id=farm_id)

    # No reading for longer than stale_after_s (120 s) since the loop started.
    await loop_of(agent).step(clock.advance(121))

    message = await expect(ws, "climate")
    assert message["farm_id"] == farm_id
    assert message["data"]["event"] == "failsafe"
    assert message["data"]["speed"] == 40
    assert message["data"]["reasons"] == ["sensors_stale"]
    # MQTT is off in this agent: the fan could not confirm, and history says so.
    assert message["data"]["fans"] == [{"device_id": fan_id, "confirmed": False}]
    entries = await history(agent, farm_id, kind="failsafe")
    assert len(entries) == 1 and entries[0]["data"]["speed"] == 40
    state = (await listing(agent, farm_id=farm_id))["climate_controls"][0]["state"]
    assert state["failsafe"] is True
    assert state["fan_speed"] == 40
    await ws.close()


async def test_settings_changes_are_queued_for_the_cloud(
    make_climate_agent: ClimateAgentFactory,
) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "fan1")
    resp = await update(agent, settings_body(farm_id, [fan_id]))
    settings_id = (await resp.json())["settings"]["id"]
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT lane, entity_id, payload FROM outbox WHERE kind = 'climate_settings'"
    )
    assert [(row["lane"], row["entity_id"]) for row in rows] == [(0, settings_id)]
    payload = json.loads(rows[0]["payload"])
    assert payload["fan_ids"] == [fan_id]
    assert payload["temperature_target"] == 24.0


async def test_the_loop_steps_on_its_own(
    make_climate_agent: ClimateAgentFactory, clock: Clock
) -> None:
    agent = await make_climate_agent(climate_interval_s=0.05)
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "fan1")
    assert (await update(agent, settings_body(farm_id, [fan_id], stale_after_s=10))).status == 200
    assert await history(agent, farm_id, kind="failsafe") == []
    clock.advance(11)

    async def failed_safe() -> list[dict[str, Any]]:
        return await history(agent, farm_id, kind="failsafe")

    entries = await eventually(failed_safe)
    assert entries[0]["data"]["speed"] == 40


async def test_a_deleted_fan_or_sensor_leaves_the_settings(
    make_climate_agent: ClimateAgentFactory,
) -> None:
    agent = await make_climate_agent()
    farm_id = await create_farm(agent)
    kept, gone = await fan(agent, farm_id, "fan1"), await fan(agent, farm_id, "fan2")
    probe = await sensor(agent, farm_id, "probe1")
    resp = await update(agent, settings_body(farm_id, [kept, gone], sensor_device_ids=[probe]))
    assert resp.status == 200, await resp.text()
    for device_id in (gone, probe):
        resp = await agent.client.delete(f"/api/v1/devices/{device_id}", headers=agent.auth())
        assert resp.status == 204, await resp.text()
    (item,) = (await listing(agent, farm_id=farm_id))["climate_controls"]
    assert item["settings"]["fan_ids"] == [kept]
    assert item["settings"]["sensor_device_ids"] is None  # back to the farm's sensors
