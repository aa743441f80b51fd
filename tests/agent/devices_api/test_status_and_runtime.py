"""Operator status, availability and state reported by the runtime, fans, and device bindings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.services.devices.registry import DeviceBinding
from agent.services.readings.writer import IncomingReading, to_ms
from agent.web.keys import DEVICES, READINGS
from protocol.timefmt import iso, utcnow
from tests.agent.devices_api.conftest import create_farm, error_of, register, tasmota_sensor
from tests.conftest import Agent

FAN_FIELDS = {
    "id",
    "name",
    "farm_id",
    "location",
    "status",
    "current_speed",
    "max_speed",
    "power_consumption",
    "runtime_hours",
}


async def status_everywhere(agent: Agent, device_id: str, farm_id: str) -> set[str]:
    """The status the device shows in every view that lists it."""
    seen = set()
    resp = await agent.client.get(f"/api/v1/devices/{device_id}", headers=agent.auth())
    seen.add((await resp.json())["status"])
    for path, key in (
        ("/api/v1/devices", "devices"),
        ("/api/v1/sensor-devices/", "devices"),
        ("/api/v1/sensors", "sensors"),
        (f"/api/v1/farms/{farm_id}", "devices"),
    ):
        resp = await agent.client.get(path, headers=agent.auth())
        [item] = (await resp.json())[key]
        seen.add(item["status"])
    return seen


async def test_status_follows_observed_availability(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    devices = agent.client.app[DEVICES]

    await devices.record_availability(device["id"], True, utcnow())
    assert await status_everywhere(agent, device["id"], farm_id) == {"online"}
    resp = await agent.client.get("/api/v1/sensor-devices/?status=online", headers=agent.auth())
    assert (await resp.json())["total"] == 1

    await devices.record_availability(device["id"], False, utcnow())
    assert await status_everywhere(agent, device["id"], farm_id) == {"offline"}

    await devices.record_availability(device["id"], True, utcnow())
    await devices.reset_availability()  # the agent restarted: unknown until it reports again
    assert await status_everywhere(agent, device["id"], farm_id) == {"offline"}


async def test_readings_stamp_last_reading(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    at = utcnow().replace(microsecond=123000)
    writer = agent.client.app[READINGS].writer
    for moment in (at, at - timedelta(minutes=5)):
        writer.submit(IncomingReading(device["id"], "temperature", "°C", 21.0, to_ms(moment)))
        await writer.flush()
        # Staged readings stamp their devices when they are folded into the series tables.
        await agent.client.app[READINGS].fold_now()

    resp = await agent.client.get("/api/v1/sensor-devices/", headers=agent.auth())
    [listed] = (await resp.json())["devices"]
    assert listed["last_reading"] == iso(at)  # an older batch never moves it back
    resp = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert (await resp.json())["last_seen"] == iso(at)


async def test_operator_status_overrides_and_returns(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    await agent.client.app[DEVICES].record_availability(device["id"], True, utcnow())

    async def put(status: Any) -> Any:
        return await agent.client.put(
            f"/api/v1/devices/{device['id']}/status", json={"status": status}, headers=agent.auth()
        )

    resp = await put("maintenance")
    body = await resp.json()
    assert resp.status == 200 and (body["status"], body["admin_status"]) == (
        "maintenance",
        "maintenance",
    )
    assert await status_everywhere(agent, device["id"], farm_id) == {"maintenance"}
    resp = await agent.client.get("/api/v1/devices?status=maintenance", headers=agent.auth())
    assert (await resp.json())["total"] == 1

    assert (await (await put("disabled")).json())["status"] == "disabled"
    resp = await put("active")
    assert (await resp.json())["status"] == "online"  # observed status shows again

    for bad in ("online", "broken", None, 3):
        await error_of(await put(bad), 422)
    resp = await agent.client.put(
        f"/api/v1/devices/{device['id']}/status", json={}, headers=agent.auth()
    )
    await error_of(resp, 422)


async def test_fans_show_spec_fields_from_reported_state(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    fan = await register(
        agent,
        {
            "name": "Exhaust 1",
            "kind": "fan",
            "farm_id": farm_id,
            "location": "East wall",
            "profile": "esphome-fan",
            "address": {"transport": "mqtt", "topic_base": "exhaust-1"},
            "max_speed": 80,
            "rated_power_w": 120,
        },
    )
    await register(agent, tasmota_sensor(farm_id))  # not a fan: not listed

    async def fans() -> list[dict[str, Any]]:
        resp = await agent.client.get("/api/v1/fans/", headers=agent.auth())
        assert resp.status == 200, await resp.text()
        items: list[dict[str, Any]] = (await resp.json())["fans"]
        return items

    [listed] = await fans()
    assert set(listed) == FAN_FIELDS
    assert listed == {
        "id": fan["id"],
        "name": "Exhaust 1",
        "farm_id": farm_id,
        "location": "East wall",
        "status": "offline",
        "current_speed": 0,
        "max_speed": 80,
        "power_consumption": 0.0,
        "runtime_hours": 0,
    }

    devices = agent.client.app[DEVICES]
    now = utcnow()
    await devices.record_availability(fan["id"], True, now - timedelta(hours=3))
    await devices.record_states(
        fan["id"], {"power": True, "fan_speed": 50}, now - timedelta(hours=3)
    )
    [listed] = await fans()
    assert (listed["status"], listed["current_speed"], listed["runtime_hours"]) == (
        "running",
        50,
        3,
    )
    assert listed["power_consumption"] == 15.0  # 120 W * 0.5 ** 3

    await devices.record_states(fan["id"], {"power": False}, now - timedelta(hours=1))
    [listed] = await fans()
    assert (listed["status"], listed["current_speed"], listed["runtime_hours"]) == ("stopped", 0, 2)
    resp = await agent.client.get("/api/v1/fans/?status=stopped", headers=agent.auth())
    assert (await resp.json())["total"] == 1
    resp = await agent.client.get("/api/v1/fans/?status=running", headers=agent.auth())
    assert (await resp.json())["total"] == 0
    resp = await agent.client.get(f"/api/v1/devices/{fan['id']}", headers=agent.auth())
    assert (await resp.json())["state"] == {"power": False, "fan_speed": 50}


class Recorder:
    """A registry listener that records what the runtime would be told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.bindings: list[DeviceBinding] = []

    async def device_bound(self, binding: DeviceBinding) -> None:
        self.events.append(("bound", binding.device_id))
        self.bindings.append(binding)

    async def device_unbound(self, device_id: str) -> None:
        self.events.append(("unbound", device_id))


async def test_runtime_gets_bindings_and_hears_about_changes(agent: Agent) -> None:
    devices = agent.client.app[DEVICES]
    recorder = Recorder()
    devices.add_listener(recorder)
    farm_id = await create_farm(agent)
    mqtt = await register(
        agent,
        tasmota_sensor(
            farm_id,
            profile="esphome-sensor",
            address={
                "transport": "mqtt",
                "topic_base": "node1",
                "variables": {"temperature": "air_temp"},
            },
        ),
    )
    serial = await register(
        agent,
        {
            "name": "pH",
            "kind": "sensor",
            "farm_id": farm_id,
            "profile": "atlas-ezo-ph",
            "address": {"transport": "serial", "port": "/dev/ttyAMA0", "baudrate": 19200},
        },
    )
    unbound = await agent.client.post(
        "/api/v1/sensor-devices/",
        json={"name": "No profile", "device_type": "ph_sensor", "farm_id": farm_id},
        headers=agent.auth(),
    )
    assert unbound.status == 201

    bindings = {binding.device_id: binding for binding in await devices.bindings()}
    assert set(bindings) == {mqtt["id"], serial["id"]}
    codec = bindings[mqtt["id"]].mqtt_codec()
    assert "node1/sensor/air_temp/state" in codec.subscriptions()
    settings = bindings[serial["id"]].serial_settings()
    assert (settings.url, settings.baudrate, settings.terminator) == ("/dev/ttyAMA0", 19200, b"\r")

    resp = await agent.client.put(
        f"/api/v1/devices/{mqtt['id']}/status", json={"status": "disabled"}, headers=agent.auth()
    )
    assert resp.status == 200
    assert {binding.device_id for binding in await devices.bindings()} == {serial["id"]}
    resp = await agent.client.put(
        f"/api/v1/devices/{mqtt['id']}/status", json={"status": "active"}, headers=agent.auth()
    )
    resp = await agent.client.delete(f"/api/v1/devices/{serial['id']}", headers=agent.auth())
    assert resp.status == 204
    assert recorder.events == [
        ("bound", mqtt["id"]),
        ("bound", serial["id"]),
        ("unbound", mqtt["id"]),
        ("bound", mqtt["id"]),
        ("unbound", serial["id"]),
    ]
