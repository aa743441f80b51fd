"""The climate loop reads a room through a zigbee2mqtt sensor as through any other."""

from __future__ import annotations

import random

import pytest

from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.devices.simulator.room import RoomModel, SimulatedRoom
from agent.web.keys import DEVICE_RUNTIME
from tests.agent.climate.conftest import (
    ClimateAgentFactory,
    Clock,
    heard,
    history,
    loop_of,
    settings_body,
    update,
)
from tests.agent.climate.test_climate_api import fan
from tests.agent.climate.test_climate_room import TICK_S, broker
from tests.agent.devices_api.conftest import create_farm, register
from tests.agent.runtime.conftest import PROFILES, runtime_settings
from tests.support.mosquitto import Mosquitto

__all__ = ["broker"]


async def test_a_hot_room_seen_by_a_zigbee_sensor_starts_the_fan(
    make_climate_agent: ClimateAgentFactory, broker: Mosquitto, clock: Clock
) -> None:
    agent = await make_climate_agent(**runtime_settings(broker))
    client = agent.client.app[DEVICE_RUNTIME].client
    assert client is not None
    await client.wait_connected(10)
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "zroom-fan")
    body = {
        "name": "Room air",
        "kind": "sensor",
        "farm_id": farm_id,
        "profile": "zigbee2mqtt-sensor",
        "address": {"transport": "mqtt", "topic_base": "zigbee2mqtt/room_air"},
    }
    await register(agent, body)
    fan_sim = SimulatedMqttDevice(
        PROFILES["esphome-fan"], "zroom-fan", port=broker.port, autopublish=False
    )
    air_sim = SimulatedMqttDevice(
        PROFILES["zigbee2mqtt-sensor"],
        "zigbee2mqtt/room_air",
        port=broker.port,
        autopublish=False,
        rng=random.Random(1),
    )
    async with fan_sim, air_sim:
        await fan_sim.wait_ready(10)
        await air_sim.wait_ready(10)
        room = SimulatedRoom(RoomModel(), [fan_sim], air_sim)
        room.model.temperature = 28.0
        resp = await update(agent, settings_body(farm_id, [fan_id], run_speed=100))
        assert resp.status == 200, await resp.text()
        loop = loop_of(agent)
        clock.advance(TICK_S)
        await room.advance(TICK_S)
        await heard(agent, farm_id, room)
        await loop.step(clock())
        actions = await history(agent, farm_id, kind="action")
        assert actions, "the loop did not act"
        first = actions[-1]["data"]
        assert first["speed"] == 100
        assert first["reasons"] == ["temperature_out_of_band"]
        assert first["cause"]["temperature"]["value"] == pytest.approx(28.0, abs=0.5)
