"""Modbus devices in the running agent: registered over the API, read into the stored series
(with calibration), alerting, commanded, shown to Home Assistant and queued for the cloud."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.devices.simulator.modbus import (
    ModbusRtuSimulator,
    ModbusTcpSimulator,
    SimulatedModbusDevice,
)
from agent.settings import DEFAULT_PROFILES_DIR
from agent.web.keys import DATABASE, DEVICE_RUNTIME
from cloud.store.sync_mirror.entity_values import device_address
from tests.agent.control.conftest import start_live
from tests.agent.devices_api.conftest import create_farm, error_of, register
from tests.agent.hub.test_discovery import hub_on
from tests.agent.modbus.conftest import CLIMATE, CO2, VFD
from tests.agent.runtime.conftest import Farm, broker, eventually
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto

__all__ = ["broker"]


def fast_profiles(tmp_path: Path) -> Path:
    """The shipped profiles, the Modbus ones polled every 0.1 s (a test waits less)."""
    target = tmp_path / "profiles"
    target.mkdir()
    for source in DEFAULT_PROFILES_DIR.glob("*.toml"):
        text = source.read_text(encoding="utf-8")
        text = text.replace("poll_interval_s = 10.0", "poll_interval_s = 0.1")
        text = text.replace("timeout_s = 1.0", "timeout_s = 0.3")
        (target / source.name).write_text(text, encoding="utf-8")
    return target


@pytest.fixture
async def rtu(tmp_path: Path) -> AsyncIterator[ModbusRtuSimulator]:
    """An RS-485 bus with a temperature/humidity sensor at unit 1 and a CO2 sensor at 104."""
    climate = SimulatedModbusDevice(1, CLIMATE)
    climate.values.update(temperature=22.0, humidity=55.0)
    sim = ModbusRtuSimulator([climate, SimulatedModbusDevice(104, CO2)], tmp_path / "ttyRS485")
    await sim.start()
    yield sim
    await sim.stop()


@pytest.fixture
async def modbus_agent(make_agent: Callable[..., Awaitable[Agent]], tmp_path: Path) -> Agent:
    """An agent without MQTT or EZO devices, its Modbus profiles polled quickly."""
    agent: Agent = await make_agent(
        profiles_dir=fast_profiles(tmp_path), reading_batch_interval_s=0.05
    )
    return agent


def on_bus(farm_id: str, profile: str, port: str, unit: int, **extra: Any) -> dict[str, Any]:
    """A POST /devices body for a sensor on an RS-485 bus."""
    return {
        "name": f"{profile} {unit}",
        "kind": "sensor",
        "farm_id": farm_id,
        "profile": profile,
        "address": {"transport": "modbus", "port": port, "unit": unit},
        **extra,
    }


async def test_sensors_on_one_bus_are_stored_calibrated_and_show_their_link(
    modbus_agent: Agent, rtu: ModbusRtuSimulator
) -> None:
    agent = modbus_agent
    farm = Farm(agent, await create_farm(agent))
    port = str(rtu.path)
    offset = {"calibration_data": {"temperature_offset": 1.5}}
    climate = await register(agent, on_bus(farm.farm_id, "modbus-xy-md02", port, 1, **offset))
    co2 = await register(agent, on_bus(farm.farm_id, "modbus-senseair-s8", port, 104))
    assert climate["address"] == {
        "transport": "modbus",
        "port": port,
        "unit": 1,
        "host": None,
        "tcp_port": None,
        "baudrate": None,
        "bytesize": None,
        "parity": None,
        "stopbits": None,
    }

    temperature = await eventually(lambda: farm.data(climate["id"], "temperature"))
    assert [point["value"] for point in temperature] == pytest.approx([23.5] * len(temperature))
    assert {p["value"] for p in await eventually(lambda: farm.data(co2["id"], "co2"))} == {800.0}
    shown = await eventually(lambda: _online(farm, climate["id"]))
    assert shown["link"]["answered"] >= 1
    assert shown["link"]["timeouts"] == 0

    metrics = await (await agent.client.get("/metrics")).text()
    assert f'farm_agent_modbus_requests_total{{device_id="{co2["id"]}",outcome="answered"}}' in (
        metrics
    )
    # The registration is queued for the cloud with its Modbus address, as the mirror reads it.
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT payload FROM outbox WHERE entity = 'devices' AND entity_id = ?", (co2["id"],)
    )
    payload = json.loads(rows[-1]["payload"])
    assert device_address(payload) == {"transport": "modbus", "port": port, "unit": 104}


async def test_a_co2_offset_calibrated_over_the_api_corrects_the_next_readings(
    modbus_agent: Agent, rtu: ModbusRtuSimulator
) -> None:
    agent = modbus_agent
    farm = Farm(agent, await create_farm(agent))
    co2 = await register(agent, on_bus(farm.farm_id, "modbus-senseair-s8", str(rtu.path), 104))
    await eventually(lambda: farm.data(co2["id"], "co2"))

    resp = await agent.client.post(
        f"/api/v1/sensors/{co2['id']}/calibrate",
        json={"metric": "co2", "points": [{"reference": 850, "raw": 800}]},
        headers=agent.auth(),
    )
    assert resp.status == 201, await resp.text()

    async def corrected() -> bool:
        points = await farm.data(co2["id"], "co2")
        return bool(points) and points[-1]["value"] == pytest.approx(850.0)

    await eventually(corrected)


async def test_a_second_device_at_the_same_unit_of_a_bus_is_a_conflict(
    modbus_agent: Agent, tmp_path: Path
) -> None:
    farm_id = await create_farm(modbus_agent)
    port = str(tmp_path / "ttyNone")
    await register(modbus_agent, on_bus(farm_id, "modbus-xy-md02", port, 3))
    resp = await modbus_agent.client.post(
        "/api/v1/devices",
        json=on_bus(farm_id, "modbus-senseair-s8", port, 3),
        headers=modbus_agent.auth(),
    )
    assert (await error_of(resp, 409))["code"] == "RESOURCE_EXISTS"
    resp = await modbus_agent.client.post(
        "/api/v1/devices",
        json=on_bus(farm_id, "modbus-senseair-s8", port, 3)
        | {"address": {"transport": "modbus", "port": port, "host": "h", "unit": 3}},
        headers=modbus_agent.auth(),
    )
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"


async def test_a_modbus_reading_beyond_a_rule_raises_an_alert(
    modbus_agent: Agent, rtu: ModbusRtuSimulator
) -> None:
    agent = modbus_agent
    farm_id = await create_farm(agent)
    device = await register(agent, on_bus(farm_id, "modbus-xy-md02", str(rtu.path), 1))
    rule = {"device_id": device["id"], "metric": "humidity", "above": 80.0, "severity": "warning"}
    resp = await agent.client.post("/api/v1/alert-rules", json=rule, headers=agent.auth())
    assert resp.status == 201, await resp.text()

    rtu.device(1).values["humidity"] = 91.0

    async def active() -> list[dict[str, Any]]:
        resp = await agent.client.get(
            "/api/v1/alerts", params={"farm_id": farm_id, "state": "active"}, headers=agent.auth()
        )
        alerts: list[dict[str, Any]] = (await resp.json())["alerts"]
        return alerts

    (alert,) = await eventually(active)
    assert alert["metric"] == "humidity"


async def test_a_scan_over_the_api_proposes_profiles_and_addresses(
    modbus_agent: Agent, rtu: ModbusRtuSimulator
) -> None:
    body = {"port": str(rtu.path), "first_unit": 1, "last_unit": 3, "timeout_s": 0.1}
    resp = await modbus_agent.client.post(
        "/api/v1/modbus/scans", json=body, headers=modbus_agent.auth()
    )
    assert resp.status == 200, await resp.text()
    result = await resp.json()
    assert result["scanned"] == 3
    (found,) = result["candidates"]
    assert (found["unit"], found["profile"], found["source"]) == (1, "modbus-xy-md02", "modbus")
    assert found["key"] == f"modbus:{rtu.path}:1"
    assert found["readings"] == {"temperature": 22.0, "humidity": 55.0}
    # It waits under Found, like a device that announces itself, and is added from there.
    resp = await modbus_agent.client.get("/api/v1/discovered-devices", headers=modbus_agent.auth())
    (listed,) = [
        d for d in (await resp.json())["discovered_devices"] if d["id"] == found["found_id"]
    ]
    assert (listed["profile"], listed["address"]) == (found["profile"], found["address"])
    farm_id = await create_farm(modbus_agent)
    resp = await modbus_agent.client.post(
        f"/api/v1/discovered-devices/{found['found_id']}/accept",
        json={"farm_id": farm_id, "name": "Rack 1 climate", "location": "Row 1"},
        headers=modbus_agent.auth(),
    )
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["address"] == found["address"]
    # A second scan finds it registered: no longer listed under Found.
    resp = await modbus_agent.client.post(
        "/api/v1/modbus/scans", json=body, headers=modbus_agent.auth()
    )
    (again,) = (await resp.json())["candidates"]
    assert again["found_id"] is None


async def test_a_scan_of_a_missing_port_or_a_bad_range_is_a_422(
    modbus_agent: Agent, tmp_path: Path
) -> None:
    url, auth = "/api/v1/modbus/scans", modbus_agent.auth()
    missing = {"port": str(tmp_path / "ttyGone"), "first_unit": 1, "last_unit": 2}
    resp = await modbus_agent.client.post(url, json=missing, headers=auth)
    error = await error_of(resp, 422)
    assert error["code"] == "VALIDATION_ERROR"
    assert "port" in json.dumps(error["details"])
    too_many = {"port": str(tmp_path / "ttyGone"), "first_unit": 1, "last_unit": 200}
    resp = await modbus_agent.client.post(url, json=too_many, headers=auth)
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"


async def test_home_assistant_sees_a_vfd_fan_and_its_command_is_confirmed_by_read_back(
    make_agent: Callable[..., Awaitable[Agent]], broker: Mosquitto, tmp_path: Path
) -> None:
    drive = SimulatedModbusDevice(7, VFD)
    sim = ModbusTcpSimulator([drive])
    await sim.start()
    try:
        agent = await start_live(make_agent, broker, profiles_dir=fast_profiles(tmp_path))
        farm_id = await create_farm(agent)
        fan = await register(
            agent,
            {
                "name": "Row fan",
                "kind": "fan",
                "farm_id": farm_id,
                "profile": "modbus-vfd-fan",
                "address": {
                    "transport": "modbus",
                    "host": "127.0.0.1",
                    "tcp_port": sim.port,
                    "unit": 7,
                },
            },
        )
        fan_id = fan["id"]
        async with hub_on(broker, "homeassistant/#", f"farm-agent/{fan_id}/#") as hub:
            configs = await eventually(lambda: _async(hub.configs(fan_id)))
            ((topic, config),) = configs.items()
            assert topic == f"homeassistant/fan/farm_{fan_id}_fan/config"
            assert config["percentage_command_topic"] == f"farm-agent/{fan_id}/fan_speed/set"

            await hub.publish(f"farm-agent/{fan_id}/fan_speed/set", "60")
            await eventually(lambda: _async(hub.seen.get(f"farm-agent/{fan_id}/fan_speed") == "60"))

        resp = await agent.client.post(
            f"/api/v1/devices/{fan_id}/commands",
            json={"kind": "fan_speed", "value": 30},
            headers=agent.auth(),
        )
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["outcome"] == "confirmed"
        assert agent.client.app[DEVICE_RUNTIME].modbus.link(fan_id) is not None
    finally:
        await sim.stop()


async def _online(farm: Farm, device_id: str) -> dict[str, Any] | None:
    device = await farm.device(device_id)
    return device if device["status"] == "online" and device.get("link") else None


async def _async(value: Any) -> Any:
    return value
