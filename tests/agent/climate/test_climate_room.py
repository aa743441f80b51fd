"""The climate loop on a live agent: real Mosquitto, simulated ESPHome fan and sensor, and a room
model whose air responds to the fan."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.devices.simulator.room import RoomModel, SimulatedRoom, fan_percent
from agent.services.climate.runtime import ClimateRuntime
from agent.web.keys import DEVICE_RUNTIME, SCHEDULES
from tests.agent.climate.conftest import (
    ClimateAgentFactory,
    Clock,
    heard,
    history,
    loop_of,
    settings_body,
    update,
)
from tests.agent.climate.test_climate_api import fan, sensor
from tests.agent.devices_api.conftest import create_farm
from tests.agent.runtime.conftest import PROFILES, eventually, runtime_settings
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto

TICK_S = 15.0


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    """A private broker on a free port."""
    mosquitto = Mosquitto(tmp_path / "broker")
    await mosquitto.start()
    yield mosquitto
    await mosquitto.stop()


@dataclass
class Rig:
    """A live agent, a farm with one fan and one sensor in a simulated room, and the clock."""

    agent: Agent
    farm_id: str
    fan_id: str
    fan: SimulatedMqttDevice
    room: SimulatedRoom
    clock: Clock

    @property
    def loop(self) -> ClimateRuntime:
        return loop_of(self.agent)

    async def tick(self, seconds: float = TICK_S) -> None:
        """Let time pass in the room, deliver the sensor's readings, then step the loop."""
        self.clock.advance(seconds)
        await self.room.advance(seconds)
        # Temperature and humidity, through the broker, the agent and its writer.
        await heard(self.agent, self.farm_id, self.room)
        await self.loop.step(self.clock())

    async def status(self, device_id: str) -> str:
        resp = await self.agent.client.get(
            f"/api/v1/devices/{device_id}", headers=self.agent.auth()
        )
        return str((await resp.json())["status"])


@pytest.fixture
async def rig(
    make_climate_agent: ClimateAgentFactory, broker: Mosquitto, clock: Clock
) -> AsyncIterator[Rig]:
    agent = await make_climate_agent(**runtime_settings(broker))
    client = agent.client.app[DEVICE_RUNTIME].client
    assert client is not None
    await client.wait_connected(10)
    farm_id = await create_farm(agent)
    fan_id = await fan(agent, farm_id, "room-fan")
    sensor_id = await sensor(agent, farm_id, "room-air")
    fan_sim = SimulatedMqttDevice(
        PROFILES["esphome-fan"], "room-fan", port=broker.port, autopublish=False
    )
    air_sim = SimulatedMqttDevice(
        PROFILES["esphome-sensor"],
        "room-air",
        port=broker.port,
        autopublish=False,
        rng=random.Random(1),
    )
    async with fan_sim, air_sim:
        await fan_sim.wait_ready(10)
        await air_sim.wait_ready(10)
        rig = Rig(
            agent, farm_id, fan_id, fan_sim, SimulatedRoom(RoomModel(), [fan_sim], air_sim), clock
        )
        await eventually(lambda: _is_online(rig, fan_id))
        await eventually(lambda: _is_online(rig, sensor_id))
        yield rig


async def _is_online(rig: Rig, device_id: str) -> bool:
    return await rig.status(device_id) == "online"


async def configure(rig: Rig, **overrides: Any) -> None:
    body = settings_body(rig.farm_id, [rig.fan_id], run_speed=100, **overrides)
    resp = await update(rig.agent, body)
    assert resp.status == 200, await resp.text()


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def test_the_loop_brings_a_hot_room_into_the_band_and_holds_it(rig: Rig) -> None:
    rig.room.model.temperature = 27.0
    await configure(rig)
    temperatures: list[float] = []
    for _ in range(45):
        await rig.tick()
        temperatures.append(rig.room.model.temperature)

    reached = next(i for i, t in enumerate(temperatures) if t <= 25.0)
    assert reached < 10, temperatures
    held = temperatures[reached:]
    assert min(held) >= 23.0 and max(held) <= 25.5, held
    # The fan really cycled, and every command was confirmed by the fan itself.
    actions = list(reversed(await history(rig.agent, rig.farm_id, kind="action")))
    speeds = [a["data"]["speed"] for a in actions]
    assert speeds[:2] == [100, 0] and speeds.count(100) >= 3, speeds
    assert all(f["confirmed"] for a in actions for f in a["data"]["fans"])
    first = actions[0]["data"]
    assert first["reasons"] == ["temperature_out_of_band"]
    assert first["cause"]["temperature"]["value"] > 25.0
    assert first["cause"]["temperature"]["target"] == 24.0

    # Minimum times (60 s each) between every start and stop.
    for earlier, later in itertools.pairwise(actions):
        assert _seconds(later["at"]) - _seconds(earlier["at"]) >= 60, (earlier, later)

    state = await rig.agent.client.get(
        "/api/v1/climate-control", params={"farm_id": rig.farm_id}, headers=rig.agent.auth()
    )
    live = (await state.json())["climate_controls"][0]["state"]
    assert abs(live["temperature"]["value"] - round(rig.room.model.temperature, 2)) < 0.01
    assert live["temperature"]["stale"] is False
    assert live["vpd"]["unit"] == "kPa"
    assert live["fan_speed"] == fan_percent(rig.fan)


async def test_minimum_off_time_delays_a_restart(rig: Rig) -> None:
    # Strong fans and a strong heat load: the room is back above the band soon after a stop.
    rig.room.model.temperature = 25.5
    rig.room.model.heat_load = 0.03
    rig.room.model.exchange = 0.02
    await configure(rig, min_on_s=0, min_off_s=120)
    for _ in range(30):
        await rig.tick(10)
    actions = list(reversed(await history(rig.agent, rig.farm_id, kind="action")))
    speeds = [a["data"]["speed"] for a in actions]
    assert speeds[:3] == [100, 0, 100], speeds
    for stop, restart in zip(actions[1::2], actions[2::2], strict=False):
        assert _seconds(restart["at"]) - _seconds(stop["at"]) >= 120
        # The loop saw the room out of band well before it was allowed to restart.
        assert restart["data"]["cause"]["temperature"]["value"] > 26.0


async def test_a_silent_sensor_sends_the_fan_to_the_failsafe_speed(rig: Rig) -> None:
    rig.room.model.temperature = 24.5
    await configure(rig, failsafe_speed=40, stale_after_s=120)
    await rig.tick()
    assert fan_percent(rig.fan) == 0

    # The sensor falls silent; the loop keeps stepping. At 120 s it is not stale yet.
    for _ in range(8):
        await rig.loop.step(rig.clock.advance(TICK_S))
    assert fan_percent(rig.fan) == 0
    await rig.loop.step(rig.clock.advance(TICK_S))
    assert fan_percent(rig.fan) == 40
    entries = await history(rig.agent, rig.farm_id, kind="failsafe")
    assert len(entries) == 1
    assert entries[0]["data"]["fans"] == [{"device_id": rig.fan_id, "confirmed": True}]
    assert entries[0]["data"]["cause"]["age_s"]["temperature"]

    # Readings again, in band: normal control stops the fan once it has run min_on_s (60 s).
    await rig.tick()
    assert fan_percent(rig.fan) == 40
    for _ in range(3):
        await rig.tick()
    assert fan_percent(rig.fan) == 0
    latest = (await history(rig.agent, rig.farm_id, kind="action"))[0]
    assert latest["data"]["reasons"][0] == "sensors_recovered"


async def test_a_manual_command_holds_off_the_loop_then_it_resumes(rig: Rig) -> None:
    rig.room.model.temperature = 24.5
    await configure(rig, manual_hold_s=300)
    await rig.tick()
    # An operator switches the fan on by hand through the fan control API.
    resp = await rig.agent.client.put(
        f"/api/v1/fans/{rig.fan_id}",
        json={"status": "running", "speed_percentage": 60},
        headers=rig.agent.auth(),
    )
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["command"]["outcome"] == "confirmed"

    for _ in range(10):  # 150 s: inside the hold, the room is at target, the loop stays away
        await rig.tick()
        assert fan_percent(rig.fan) == 60
    listed = await rig.agent.client.get(
        "/api/v1/climate-control", params={"farm_id": rig.farm_id}, headers=rig.agent.auth()
    )
    live = (await listed.json())["climate_controls"][0]["state"]
    assert live["manual_hold"] is True and live["manual_hold_until"] is not None

    for _ in range(12):  # past the 300 s hold
        await rig.tick()
    assert fan_percent(rig.fan) == 0
    holds = await history(rig.agent, rig.farm_id, kind="hold")
    assert [h["data"]["device_id"] for h in holds] == [rig.fan_id]
    resumed = (await history(rig.agent, rig.farm_id, kind="action"))[0]
    assert resumed["data"]["reasons"][0] == "hold_ended"
    assert _seconds(resumed["at"]) - _seconds(holds[0]["at"]) >= 300


async def test_a_schedule_leaves_a_fan_the_loop_drives_alone(rig: Rig) -> None:
    await configure(rig)
    resp = await rig.agent.client.put(
        f"/api/v1/fans/{rig.fan_id}",
        json={
            "status": "auto",
            "speed_percentage": 80,
            "schedule": {"enabled": True, "start_time": "22:00", "end_time": "06:00"},
        },
        headers=rig.agent.auth(),
    )
    assert resp.status == 200, await resp.text()
    schedules = rig.agent.client.app[SCHEDULES]
    midnight = datetime(2026, 11, 23, 23, 30, tzinfo=UTC)
    assert await schedules.apply_at(rig.fan_id, midnight) is None  # the loop owns the fan

    resp = await update(rig.agent, settings_body(rig.farm_id, [rig.fan_id], mode="manual"))
    assert resp.status == 200, await resp.text()
    record = await schedules.apply_at(rig.fan_id, midnight)  # handed back: the window applies
    assert record is not None and record.outcome == "confirmed"
    assert fan_percent(rig.fan) == 80


async def test_handing_a_fan_back_to_auto_ends_the_hold_at_once(rig: Rig) -> None:
    rig.room.model.temperature = 24.5
    await configure(rig, manual_hold_s=3600)
    await rig.tick()
    url, auth = f"/api/v1/fans/{rig.fan_id}", rig.agent.auth()
    resp = await rig.agent.client.put(
        url, json={"status": "running", "speed_percentage": 60}, headers=auth
    )
    assert resp.status == 200, await resp.text()
    await rig.tick()
    assert fan_percent(rig.fan) == 60  # held: the loop leaves the person's speed alone

    resp = await rig.agent.client.put(url, json={"status": "auto"}, headers=auth)
    assert resp.status == 200, await resp.text()
    await rig.tick()
    assert fan_percent(rig.fan) == 0  # the room is at target: the loop stops the fan
    resumed = (await history(rig.agent, rig.farm_id, kind="action"))[0]
    assert resumed["data"]["reasons"][0] == "hold_ended"


async def test_a_clock_jump_is_not_time_gone_by_for_the_loop(rig: Rig) -> None:
    # A Pi booted two days behind; NTP sets its clock while the loop runs (the clock watch
    # tells the loop of the jump). A fresh reading stays fresh and a manual hold still holds.
    rig.room.model.temperature = 24.5
    await configure(rig, failsafe_speed=40, stale_after_s=120, manual_hold_s=300)
    await rig.tick()
    assert fan_percent(rig.fan) == 0
    resp = await rig.agent.client.put(
        f"/api/v1/fans/{rig.fan_id}",
        json={"status": "running", "speed_percentage": 60},
        headers=rig.agent.auth(),
    )
    assert resp.status == 200, await resp.text()

    jump_s = 2 * 86_400
    rig.loop.clock_jumped(jump_s * 1000)
    await rig.loop.step(rig.clock.advance(jump_s + TICK_S))
    assert fan_percent(rig.fan) == 60, "neither the fail-safe nor the end of the hold"
    listed = await rig.agent.client.get(
        "/api/v1/climate-control", params={"farm_id": rig.farm_id}, headers=rig.agent.auth()
    )
    assert (await listed.json())["climate_controls"][0]["state"]["manual_hold"] is True
    assert await history(rig.agent, rig.farm_id, kind="failsafe") == []
