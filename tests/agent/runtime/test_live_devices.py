"""The running agent talks to real devices: readings, availability and new registrations."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.devices.simulator.ezo import EzoSimulator
from agent.devices.simulator.mqtt import SimulatedMqttDevice
from tests.agent.devices_api.conftest import register
from tests.agent.runtime.conftest import (
    PROFILES,
    Farm,
    eventually,
    publish_acknowledged,
    tasmota_payload,
)
from tests.support.mosquitto import Mosquitto


def simulator(broker: Mosquitto, profile: str, base: str) -> SimulatedMqttDevice:
    """A device that publishes only when the test says so."""
    return SimulatedMqttDevice(
        PROFILES[profile], base, port=broker.port, autopublish=False, rng=random.Random(3)
    )


async def test_readings_of_a_device_registered_after_start_reach_the_api(
    farm: Farm, broker: Mosquitto
) -> None:
    device_id = await farm.register_mqtt("tasmota-sht3x", "row1-climate")
    async with simulator(broker, "tasmota-sht3x", "row1-climate") as sim:
        await sim.wait_ready(10)
        sim.set_reading("temperature", 21.7)
        await sim.publish_telemetry()

        points = await eventually(lambda: farm.data(device_id, "temperature"))
        assert [point["value"] for point in points] == [21.7]
        listed = await farm.device(device_id)
        assert listed["status"] == "online"
        assert listed["last_seen"] is not None


async def test_availability_follows_the_status_topic(farm: Farm, broker: Mosquitto) -> None:
    device_id = await farm.register_mqtt("esphome-sensor", "row2")

    async def status() -> str:
        return str((await farm.device(device_id))["status"])

    sim = simulator(broker, "esphome-sensor", "row2")
    await sim.start()
    await sim.wait_ready(10)
    await eventually(lambda: _is(status, "online"))
    # A clean shutdown publishes the same retained "offline" the broker sends as the last will.
    await sim.stop()
    await eventually(lambda: _is(status, "offline"))


async def _is(read: Any, expected: str) -> bool:
    return bool(await read() == expected)


async def test_a_deleted_device_is_no_longer_recorded(farm: Farm, broker: Mosquitto) -> None:
    device_id = await farm.register_mqtt("tasmota-sht3x", "gone")
    resp = await farm.agent.client.delete(f"/api/v1/devices/{device_id}", headers=farm.agent.auth())
    assert resp.status == 204
    async with simulator(broker, "tasmota-sht3x", "gone") as sim:
        await sim.wait_ready(10)
        await sim.publish_telemetry()
        other = await farm.register_mqtt("tasmota-sht3x", "kept")
        async with simulator(broker, "tasmota-sht3x", "kept") as kept:
            await kept.wait_ready(10)
            await kept.publish_telemetry()
            await eventually(lambda: farm.stored(other, "temperature"))
    assert await farm.stored(device_id, "temperature") == set()


async def test_no_acknowledged_reading_is_lost_across_a_broker_restart(
    farm: Farm, broker: Mosquitto
) -> None:
    device_id = await farm.register_mqtt("tasmota-sht3x", "restart")
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    payloads = [tasmota_payload(i, base) for i in range(300)]
    topic = "tele/restart/SENSOR"
    sent = await publish_acknowledged(broker.host, broker.port, topic, payloads[:150], "pub")
    # Graceful restart: the broker saves the agent's persistent session and its queue.
    await broker.restart()
    sent += await publish_acknowledged(broker.host, broker.port, topic, payloads[150:], "pub")
    assert sent == 300

    expected = {int((base + timedelta(seconds=i)).timestamp() * 1000) for i in range(300)}

    async def all_stored() -> bool:
        return await farm.stored(device_id, "temperature") == expected

    await eventually(all_stored, within=20)


async def test_a_serial_ezo_circuit_is_polled(farm: Farm, tmp_path: Path) -> None:
    async with EzoSimulator("ph", tmp_path / "ttyEZO-ph", rng=random.Random(5)) as sim:
        body = {
            "name": "Tank pH",
            "kind": "sensor",
            "farm_id": farm.farm_id,
            "profile": "atlas-ezo-ph",
            "address": {"transport": "serial", "port": str(sim.path)},
        }
        device_id = str((await register(farm.agent, body))["id"])
        points = await eventually(lambda: farm.data(device_id, "ph"))
        assert all(0 < point["value"] < 14 for point in points)
        device = await eventually(lambda: _firmware_known(farm, device_id))
        assert device["status"] == "online"
        assert device["firmware_version"] == sim.firmware
        assert "R" in sim.received


async def _firmware_known(farm: Farm, device_id: str) -> dict[str, Any] | None:
    device = await farm.device(device_id)
    return device if device.get("firmware_version") and device["status"] == "online" else None
