"""On the real broker: zigbee2mqtt and Shelly devices announce themselves, appear under Found
with their readings, and once added are read, watched and switched like any device."""

from __future__ import annotations

import json
import random
from typing import Any

import aiomqtt

from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.web.keys import DATABASE
from tests.agent.discovery.test_announcements import Z2M_DEVICES
from tests.agent.runtime.conftest import PROFILES, Farm, eventually
from tests.support.mosquitto import Mosquitto

# "Appears under Found within 5 s".
WITHIN = 5.0


def simulator(broker: Mosquitto, profile: str, base: str) -> SimulatedMqttDevice:
    return SimulatedMqttDevice(
        PROFILES[profile], base, port=broker.port, autopublish=False, rng=random.Random(5)
    )


async def found(farm: Farm) -> dict[str, dict[str, Any]]:
    resp = await farm.agent.client.get("/api/v1/discovered-devices", headers=farm.agent.auth())
    body = await resp.json()
    assert resp.status == 200, body
    return {item["name"]: item for item in body["discovered_devices"]}


async def accept(farm: Farm, found_id: str, **body: Any) -> dict[str, Any]:
    resp = await farm.agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/accept",
        json={"farm_id": farm.farm_id, **body},
        headers=farm.agent.auth(),
    )
    device: dict[str, Any] = await resp.json()
    assert resp.status == 201, device
    return device


async def command(farm: Farm, device_id: str, kind: str, value: bool | int) -> dict[str, Any]:
    resp = await farm.agent.client.post(
        f"/api/v1/devices/{device_id}/commands",
        json={"kind": kind, "value": value},
        headers=farm.agent.auth(),
    )
    record: dict[str, Any] = await resp.json()
    assert resp.status == 200, record
    return record


async def test_zigbee2mqtt_devices_are_found_added_read_and_switched(
    farm: Farm, broker: Mosquitto
) -> None:
    sensor = simulator(broker, "zigbee2mqtt-sensor", "zigbee2mqtt/climate_rack_2")
    plug = simulator(broker, "zigbee2mqtt-plug", "zigbee2mqtt/pump_plug")
    async with sensor, plug, aiomqtt.Client("127.0.0.1", broker.port) as bridge:
        await sensor.wait_ready(10)
        await plug.wait_ready(10)
        # zigbee2mqtt publishes its device list retained.
        await bridge.publish(
            "zigbee2mqtt/bridge/devices", json.dumps(Z2M_DEVICES), qos=1, retain=True
        )
        listed = await eventually(
            lambda: _names(farm, {"climate_rack_2", "pump_plug", "grow_light"}), WITHIN
        )
        assert listed["climate_rack_2"]["profile"] == "zigbee2mqtt-sensor"
        assert listed["pump_plug"]["profile"] == "zigbee2mqtt-plug"
        assert "door_button" not in listed  # nothing the farm can use

        # Readings heard so far, through the proposed profile.
        sensor.set_reading("temperature", 24.25)
        await sensor.publish_telemetry()
        heard = await eventually(lambda: _reading(farm, "climate_rack_2", "temperature"))
        assert heard == 24.25

        device = await accept(
            farm, listed["climate_rack_2"]["id"], name="Rack 2 climate", location="Row 1"
        )
        sensor.set_reading("temperature", 23.5)
        await sensor.publish_telemetry()
        points = await eventually(lambda: farm.data(device["id"], "temperature"))
        assert [point["value"] for point in points] == [23.5]
        # Synced like any device: its registration and readings are in the outbox.
        assert await _queued(farm, device["id"])
        # Alerts: a rule on a Zigbee sensor's CO2 fires on its readings.
        rule = {"device_id": device["id"], "metric": "co2", "above": 1500.0}
        resp = await farm.agent.client.post(
            "/api/v1/alert-rules", json=rule, headers=farm.agent.auth()
        )
        assert resp.status == 201, await resp.text()
        sensor.set_reading("co2", 2100.0)
        await sensor.publish_telemetry()
        [alert] = await eventually(lambda: _alerts(farm))
        assert (alert["device_id"], alert["metric"]) == (device["id"], "co2")
        # {"state":"online"} on <friendly_name>/availability.
        await bridge.publish(
            "zigbee2mqtt/climate_rack_2/availability", '{"state":"offline"}', qos=1, retain=True
        )
        await eventually(lambda: _status(farm, device["id"], "offline"))
        await bridge.publish(
            "zigbee2mqtt/climate_rack_2/availability", '{"state":"online"}', qos=1, retain=True
        )
        await eventually(lambda: _status(farm, device["id"], "online"))

        pump = await accept(farm, listed["pump_plug"]["id"], name="Pump", kind="pump")
        await eventually(lambda: _status(farm, pump["id"], "online"))
        record = await command(farm, pump["id"], "power", True)
        assert (record["outcome"], record["observed"]["power"]) == ("confirmed", True)
        assert plug.state["power"] is True
        await bridge.publish("zigbee2mqtt/bridge/devices", b"", qos=1, retain=True)


async def test_a_shelly_is_found_by_its_online_message_added_and_switched(
    farm: Farm, broker: Mosquitto
) -> None:
    base = "shellyplus1pm-a8032ab12345"
    async with simulator(broker, "shelly-switch", base) as shelly:
        await shelly.wait_ready(10)
        listed = await eventually(lambda: _names(farm, {base}), WITHIN)
        assert listed[base]["profile"] == "shelly-switch"
        assert listed[base]["model"] == "Plus1PM SNSW-001P16EU"  # from Shelly.GetDeviceInfo

        shelly.set_reading("power", 61.5)
        await shelly.publish_telemetry()
        assert await eventually(lambda: _reading(farm, base, "power")) == 61.5
        # A burst is written at most every couple of seconds, and the latest value wins.
        for watts in (62.5, 63.5):
            shelly.set_reading("power", watts)
            await shelly.publish_telemetry()
        assert await eventually(lambda: _is_value(_reading(farm, base, "power"), 63.5))

        device = await accept(farm, listed[base]["id"], name="Valve 3", kind="valve")
        await eventually(lambda: _status(farm, device["id"], "online"))
        record = await command(farm, device["id"], "valve", True)
        assert (record["outcome"], record["observed"]["valve"]) == ("confirmed", True)
        assert shelly.state["valve"] is True
        shelly.set_reading("power", 12.0)
        await shelly.publish_telemetry()
        points = await eventually(lambda: farm.data(device["id"], "power"))
        assert [point["value"] for point in points] == [12.0]
        assert await _queued(farm, device["id"])


async def _names(farm: Farm, names: set[str]) -> dict[str, dict[str, Any]] | None:
    listed = await found(farm)
    return listed if names <= listed.keys() else None


async def _reading(farm: Farm, name: str, metric: str) -> float | None:
    item = (await found(farm)).get(name)
    return None if item is None else item["readings"].get(metric)


async def _status(farm: Farm, device_id: str, status: str) -> bool:
    return bool((await farm.device(device_id))["status"] == status)


async def _alerts(farm: Farm) -> list[dict[str, Any]]:
    resp = await farm.agent.client.get(
        "/api/v1/alerts", params={"farm_id": farm.farm_id}, headers=farm.agent.auth()
    )
    alerts: list[dict[str, Any]] = (await resp.json())["alerts"]
    return alerts


async def _queued(farm: Farm, device_id: str) -> bool:
    """The device's registration and at least one of its readings wait in the sync outbox."""
    db = farm.agent.client.app[DATABASE]
    registered = await db.fetch_value(
        "SELECT count(*) FROM outbox WHERE entity = 'devices' AND entity_id = ?", (device_id,)
    )
    readings = await db.fetch_value(
        "SELECT count(*) FROM (SELECT series_id FROM outbox_readings"
        " UNION ALL SELECT series_id FROM outbox_staged) AS o JOIN series s ON s.id = o.series_id"
        " WHERE s.device_id = ?",
        (device_id,),
    )
    return bool(registered and readings)


async def test_tasmota_and_esphome_announcements_are_found_with_their_readings(
    farm: Farm, broker: Mosquitto
) -> None:
    config = {
        "dn": "Rack 3 climate", "hn": "rack3-1234", "mac": "A4CF12345678", "md": "Generic",
        "sw": "13.2.0", "t": "rack3_climate", "ft": "%prefix%/%topic%/",
        "tp": ["cmnd", "stat", "tele"], "rl": [0, 0, 0, 0, 0, 0, 0, 0], "lt_st": 0, "ver": 1,
    }  # fmt: skip
    sensors = {"sn": {"Time": "2026-03-01T10:15:00", "SHT3X": {"Temperature": 23.4,
               "Humidity": 55.1, "DewPoint": 13.9}, "TempUnit": "C"}, "ver": 1}  # fmt: skip
    esphome = {
        "dev_cla": "temperature", "unit_of_meas": "°C", "name": "Rack temp",
        "stat_t": "rack-node/sensor/rack_temp/state", "avty_t": "rack-node/status",
        "uniq_id": "ESPsensorrack_temp",
        "dev": {"ids": "a4cf12abcdef", "name": "rack-node", "sw": "esphome v2024.6.1",
                "mdl": "esp32dev", "mf": "espressif"},
    }  # fmt: skip
    async with aiomqtt.Client("127.0.0.1", broker.port) as device:
        await device.publish(
            "tasmota/discovery/A4CF12345678/config", json.dumps(config), qos=1, retain=True
        )
        await device.publish(
            "tasmota/discovery/A4CF12345678/sensors", json.dumps(sensors), qos=1, retain=True
        )
        await device.publish(
            "homeassistant/sensor/rack-node/rack_temp/config",
            json.dumps(esphome),
            qos=1,
            retain=True,
        )
        listed = await eventually(lambda: _names(farm, {"Rack 3 climate", "rack-node"}), WITHIN)
        tasmota, node = listed["Rack 3 climate"], listed["rack-node"]
        assert (tasmota["profile"], tasmota["address"]["topic_base"]) == (
            "tasmota-sht3x",
            "rack3_climate",
        )
        assert tasmota["readings"]["temperature"] == 23.4
        assert node["profile"] == "esphome-sensor"
        assert node["address"]["variables"] == {"temperature": "rack_temp"}
        # Their own topics, decoded by the proposed profile, refresh the readings.
        await device.publish("rack-node/sensor/rack_temp/state", "21.5", qos=1)
        await device.publish(
            "tele/rack3_climate/SENSOR",
            '{"SHT3X":{"Temperature":25.0,"Humidity":50.0,"DewPoint":14.0},"TempUnit":"C"}',
            qos=1,
        )
        assert await eventually(lambda: _reading(farm, "rack-node", "temperature")) == 21.5
        assert await eventually(
            lambda: _is_value(_reading(farm, "Rack 3 climate", "temperature"), 25.0)
        )
        for topic in (
            "tasmota/discovery/A4CF12345678/config",
            "tasmota/discovery/A4CF12345678/sensors",
            "homeassistant/sensor/rack-node/rack_temp/config",
        ):
            await device.publish(topic, b"", qos=1, retain=True)


async def _is_value(read: Any, expected: float) -> bool:
    return bool(await read == expected)
