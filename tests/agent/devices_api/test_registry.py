"""Registering devices and reading them back through /sensor-devices/, /devices and farm detail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agent.devices_api.conftest import create_farm, error_of, register, tasmota_sensor
from tests.conftest import Agent

SENSOR_DEVICE_FIELDS = {
    "id",
    "name",
    "device_type",
    "farm_id",
    "location",
    "status",
    "last_reading",
    "battery_level",
    "firmware_version",
    "mac_address",
    "calibration_data",
}


async def test_sensor_device_is_registered_and_listed_with_spec_fields(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    body = {
        "name": "Greenhouse sensor 1",
        "device_type": "temperature_humidity",
        "farm_id": farm_id,
        "location": "Row 1, Rack A",
        "mac_address": "aa:bb:cc:dd:ee:01",
        "calibration_data": {"ph_offset": 0.1, "temperature_compensation": True},
    }
    resp = await agent.client.post("/api/v1/sensor-devices/", json=body, headers=agent.auth())
    created = await resp.json()
    assert resp.status == 201, created

    assert set(created) == SENSOR_DEVICE_FIELDS
    assert created["mac_address"] == "AA:BB:CC:DD:EE:01"
    assert created["status"] == "offline"  # nothing has been heard from it yet
    assert created["last_reading"] is None
    assert created["calibration_data"] == {"ph_offset": 0.1, "temperature_compensation": True}

    resp = await agent.client.get("/api/v1/sensor-devices/", headers=agent.auth())
    listed = await resp.json()
    assert resp.status == 200
    assert listed["total"] == 1 and listed["limit"] == 50 and listed["offset"] == 0
    assert listed["devices"] == [created]


async def test_sensor_devices_filter_by_farm_type_and_status(agent: Agent) -> None:
    north, south = await create_farm(agent, "North"), await create_farm(agent, "South")
    for farm_id, device_type in (
        (north, "temperature_humidity"),
        (north, "ph_sensor"),
        (south, "ph_sensor"),
    ):
        resp = await agent.client.post(
            "/api/v1/sensor-devices/",
            json={"name": device_type, "device_type": device_type, "farm_id": farm_id},
            headers=agent.auth(),
        )
        assert resp.status == 201, await resp.text()

    async def names(query: str) -> list[tuple[str, str]]:
        resp = await agent.client.get(f"/api/v1/sensor-devices/?{query}", headers=agent.auth())
        assert resp.status == 200, await resp.text()
        return sorted((d["farm_id"], d["device_type"]) for d in (await resp.json())["devices"])

    assert await names(f"farm_id={north}") == sorted(
        [(north, "temperature_humidity"), (north, "ph_sensor")]
    )
    assert await names("device_type=ph_sensor") == sorted(
        [(north, "ph_sensor"), (south, "ph_sensor")]
    )
    assert await names(f"farm_id={south}&device_type=temperature_humidity") == []
    assert len(await names("status=offline")) == 3
    assert await names("status=online") == []
    resp = await agent.client.get("/api/v1/sensor-devices/?limit=2&offset=1", headers=agent.auth())
    page = await resp.json()
    assert (page["total"], len(page["devices"]), page["limit"], page["offset"]) == (3, 2, 2, 1)


async def test_device_with_profile_and_address_shows_everywhere(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(
        agent,
        tasmota_sensor(
            farm_id, firmware_version="14.3.0", battery_level=87, mac_address="DE:AD:BE:EF:00:01"
        ),
    )

    assert device["kind"] == "sensor"
    assert device["device_type"] == "temperature_humidity"  # from the profile
    assert device["profile"] == "tasmota-sht3x"
    assert device["address"] == {
        "transport": "mqtt",
        "topic_base": "row1-climate",
        "variables": {},
    }
    assert (device["firmware_version"], device["battery_level"]) == ("14.3.0", 87)
    assert device["status"] == "offline" and device["admin_status"] == "active"

    resp = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert resp.status == 200 and await resp.json() == device
    resp = await agent.client.get(f"/api/v1/devices?farm_id={farm_id}", headers=agent.auth())
    assert (await resp.json())["devices"] == [device]
    resp = await agent.client.get(f"/api/v1/farms/{farm_id}", headers=agent.auth())
    assert (await resp.json())["devices"] == [
        {
            "id": device["id"],
            "name": "Row 1 climate",
            "type": "temperature_humidity",
            "status": "offline",
        }
    ]


async def test_serial_device_shows_its_line_settings(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(
        agent,
        {
            "name": "Tank EC",
            "kind": "sensor",
            "farm_id": farm_id,
            "profile": "atlas-ezo-ec",
            "address": {
                "transport": "serial",
                "port": "/dev/serial/by-id/usb-ec",
                "baudrate": 38400,
            },
        },
    )
    assert device["device_type"] == "ec_sensor"
    assert device["address"] == {
        "transport": "serial",
        "port": "/dev/serial/by-id/usb-ec",
        "baudrate": 38400,  # the override
        "bytesize": 8,  # the profile's
        "parity": "N",
        "stopbits": 1,
    }


async def test_actuators_default_their_device_type_to_the_kind(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    for kind, profile, base in (
        ("fan", "esphome-fan", "exhaust"),
        ("light", "tasmota-dimmer", "lights-row1"),
        ("pump", "tasmota-relay", "pump-1"),
        ("valve", "tasmota-relay", "valve-1"),
        ("light", "tasmota-relay", "lights-row2"),
    ):
        device = await register(
            agent,
            {
                "name": f"{kind} {base}",
                "kind": kind,
                "farm_id": farm_id,
                "profile": profile,
                "address": {"transport": "mqtt", "topic_base": base},
            },
        )
        assert (device["kind"], device["device_type"]) == (kind, kind)


async def test_calibration_data_offset_applies_from_registration(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(
        agent, tasmota_sensor(farm_id, calibration_data={"temperature_offset": -0.4})
    )
    assert device["calibration_data"]["temperature_offset"] == -0.4
    assert "calibrated_at" in device["calibration_data"]

    resp = await agent.client.get(
        f"/api/v1/sensors/{device['id']}/calibrations", headers=agent.auth()
    )
    [calibration] = (await resp.json())["calibrations"]
    assert calibration["method"] == "agent_offset" and calibration["active"] is True
    assert (calibration["metric"], calibration["slope"], calibration["offset"]) == (
        "temperature",
        1.0,
        -0.4,
    )
    assert calibration["performed_by"]["email"] == "admin@farm.test"


BAD_BODIES: list[tuple[str, dict[str, Any], str]] = [
    ("mac with dashes", {"mac_address": "aa-bb-cc-dd-ee-ff"}, "mac_address"),
    ("mac too short", {"mac_address": "aa:bb:cc:dd:ee"}, "mac_address"),
    ("mac not hex", {"mac_address": "zz:bb:cc:dd:ee:ff"}, "mac_address"),
    ("mac without colons", {"mac_address": "aabbccddeeff"}, "mac_address"),
    ("firmware with v", {"firmware_version": "v1.2"}, "firmware_version"),
    ("firmware undotted", {"firmware_version": "12"}, "firmware_version"),
    ("firmware double dot", {"firmware_version": "1..2"}, "firmware_version"),
    ("firmware words", {"firmware_version": "latest"}, "firmware_version"),
    ("battery 101", {"battery_level": 101}, "battery_level"),
    ("battery negative", {"battery_level": -1}, "battery_level"),
    ("battery fraction", {"battery_level": 50.5}, "battery_level"),
    ("battery as text", {"battery_level": "50"}, "battery_level"),
    ("battery as boolean", {"battery_level": True}, "battery_level"),
    ("unknown profile", {"profile": "no-such-firmware"}, "profile"),
    ("profile of another kind", {"profile": "esphome-fan"}, "profile"),
    ("device_type of another kind", {"device_type": "fan"}, "device_type"),
    ("unknown device_type", {"device_type": "soil_moisture"}, "device_type"),
    ("device_type not the profile's", {"device_type": "ph_sensor"}, "device_type"),
    (
        "address on the wrong transport",
        {"address": {"transport": "serial", "port": "/dev/ttyUSB0"}},
        "address.transport",
    ),
    (
        "variable the profile lacks",
        {"address": {"transport": "mqtt", "topic_base": "x", "variables": {"fan": "f"}}},
        "address.variables",
    ),
    ("wildcard topic", {"address": {"transport": "mqtt", "topic_base": "row/#"}}, "address"),
    ("profile without address", {"address": None}, "body"),
    (
        "offset of a metric it lacks",
        {"calibration_data": {"ph_offset": 0.2}},
        "calibration_data.ph_offset",
    ),
    ("offset not a number", {"calibration_data": {"temperature_offset": "1"}}, "calibration_data"),
    ("max_speed on a sensor", {"max_speed": 50}, "max_speed"),
    ("unknown field", {"colour": "red"}, "colour"),
    ("empty name", {"name": ""}, "name"),
    ("unknown kind", {"kind": "heater"}, "kind"),
]


@pytest.mark.parametrize(("case", "change", "field"), BAD_BODIES, ids=[c for c, _, _ in BAD_BODIES])
async def test_bad_registration_is_refused_and_writes_nothing(
    agent: Agent, case: str, change: dict[str, Any], field: str
) -> None:
    farm_id = await create_farm(agent)
    resp = await agent.client.post(
        "/api/v1/devices", json=tasmota_sensor(farm_id, **change), headers=agent.auth()
    )
    error = await error_of(resp, 422)
    assert error["code"] == "VALIDATION_ERROR"
    fields = [item["field"] for item in error["details"]["errors"]]
    assert any(name.startswith(field) for name in fields), (case, error)

    resp = await agent.client.get("/api/v1/devices", headers=agent.auth())
    assert (await resp.json())["total"] == 0


async def test_sensor_device_needs_a_known_sensor_type(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    for device_type in ("fan", "light_level", "PH"):
        resp = await agent.client.post(
            "/api/v1/sensor-devices/",
            json={"name": "x", "device_type": device_type, "farm_id": farm_id},
            headers=agent.auth(),
        )
        error = await error_of(resp, 422)
        assert error["details"]["errors"][0]["field"] == "device_type", error


async def test_duplicates_are_conflicts(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    await register(agent, tasmota_sensor(farm_id, mac_address="aa:bb:cc:dd:ee:ff"))

    resp = await agent.client.post(
        "/api/v1/devices",
        json=tasmota_sensor(
            farm_id,
            mac_address="AA:BB:CC:DD:EE:FF",
            address={"transport": "mqtt", "topic_base": "other"},
        ),
        headers=agent.auth(),
    )
    error = await error_of(resp, 409)
    assert (error["code"], error["details"]["field"]) == ("RESOURCE_EXISTS", "mac_address")

    resp = await agent.client.post(
        "/api/v1/devices", json=tasmota_sensor(farm_id), headers=agent.auth()
    )
    assert (await error_of(resp, 409))["details"]["field"] == "address.topic_base"

    serial = {
        "name": "pH",
        "kind": "sensor",
        "farm_id": farm_id,
        "profile": "atlas-ezo-ph",
        "address": {"transport": "serial", "port": "/dev/ttyUSB0"},
    }
    await register(agent, serial)
    resp = await agent.client.post(
        "/api/v1/devices", json={**serial, "profile": "atlas-ezo-ec"}, headers=agent.auth()
    )
    assert (await error_of(resp, 409))["details"]["field"] == "address.port"

    # A Tasmota node with a sensor and a relay: one topic base, two profiles, two devices.
    await register(
        agent,
        {
            "name": "Row 1 pump",
            "kind": "pump",
            "farm_id": farm_id,
            "profile": "tasmota-relay",
            "address": {"transport": "mqtt", "topic_base": "row1-climate"},
        },
    )
    resp = await agent.client.get("/api/v1/devices", headers=agent.auth())
    assert (await resp.json())["total"] == 3


async def test_deleting_a_device_removes_it_and_its_history(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(
        agent, tasmota_sensor(farm_id, calibration_data={"temperature_offset": 0.5})
    )
    resp = await agent.client.delete(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert resp.status == 204 and await resp.read() == b""

    for path in (f"/api/v1/devices/{device['id']}", f"/api/v1/sensors/{device['id']}/calibrations"):
        resp = await agent.client.get(path, headers=agent.auth())
        assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"
    resp = await agent.client.delete(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    await error_of(resp, 404)
    # The MAC and topic are free again.
    await register(agent, tasmota_sensor(farm_id))


async def test_deleting_the_farm_removes_its_devices(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    resp = await agent.client.delete(f"/api/v1/farms/{farm_id}", headers=agent.auth())
    assert resp.status == 204
    resp = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    await error_of(resp, 404)


async def test_bad_ids_and_queries_are_validation_errors(agent: Agent) -> None:
    for path in (
        "/api/v1/devices/not-a-uuid",
        "/api/v1/sensor-devices/?farm_id=nope",
        "/api/v1/sensor-devices/?status=broken",
        "/api/v1/devices?limit=0",
        "/api/v1/fans/?offset=-1",
    ):
        resp = await agent.client.get(path, headers=agent.auth())
        assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR", path
