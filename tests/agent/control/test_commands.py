"""Commands to actuators: confirmed by the device, timed out, refused, and always recorded."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

from agent.devices.codec import Command
from agent.devices.gateway import CommandResult
from agent.services.control.actuators import ActuatorService
from agent.store.actuator_commands import ActuatorCommandStore
from agent.store.db import Database
from agent.store.devices import DeviceStore
from agent.store.space import StorageFull
from agent.web.keys import ACTUATORS, DATABASE, DEVICES
from tests.agent.control.conftest import Rig
from tests.agent.devices_api.conftest import create_farm, error_of, login_as, register
from tests.conftest import Agent


async def _command(rig: Rig, device_id: str, body: dict[str, Any], token: str | None = None) -> Any:
    return await rig.agent.client.post(
        f"/api/v1/devices/{device_id}/commands", json=body, headers=rig.agent.auth(token)
    )


async def test_a_fan_command_is_confirmed_shown_and_recorded(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "fan1")
    async with rig.simulator("tasmota-ifan", "fan1") as sim:
        await sim.wait_ready(10)
        await rig.online(fan_id)
        resp = await _command(rig, fan_id, {"kind": "fan_speed", "value": 100})
        record = await resp.json()
        assert resp.status == 200, record
        assert record["outcome"] == "confirmed"
        assert record["observed"] == {"fan_speed": 100}
        assert sim.state["fan_speed"] == 100

        fan = await rig.fan(fan_id)
        assert (fan["status"], fan["current_speed"]) == ("running", 100)

    history = await rig.get(f"/api/v1/devices/{fan_id}/commands")
    assert history["total"] == 1
    (stored,) = history["commands"]
    assert stored["id"] == record["id"]
    assert (stored["kind"], stored["value"], stored["source"]) == ("fan_speed", 100, "manual")
    me = await rig.get("/api/v1/users/profile")
    assert stored["requested_by"] == me["id"]


async def test_a_relay_switches_a_pump(rig: Rig) -> None:
    pump_id = await rig.actuator("pump", "tasmota-relay", "pump1")
    async with rig.simulator("tasmota-relay", "pump1") as sim:
        await sim.wait_ready(10)
        await rig.online(pump_id)
        resp = await _command(rig, pump_id, {"kind": "power", "value": True})
        assert (await resp.json())["outcome"] == "confirmed"
        assert sim.state["power"] is True
        device = await rig.get(f"/api/v1/devices/{pump_id}")
        assert device["state"]["power"] is True


async def test_a_device_that_does_not_answer_times_out_and_is_recorded(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "silent")
    resp = await _command(rig, fan_id, {"kind": "fan_speed", "value": 50})
    record = await resp.json()
    assert resp.status == 200, record
    assert record["outcome"] == "timed_out"
    history = await rig.get(f"/api/v1/devices/{fan_id}/commands")
    assert [c["outcome"] for c in history["commands"]] == ["timed_out"]


async def test_a_device_not_connected_is_503_and_recorded(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    body = {
        "name": "Fan",
        "kind": "fan",
        "farm_id": farm_id,
        "profile": "tasmota-ifan",
        "address": {"transport": "mqtt", "topic_base": "nowhere"},
    }
    fan_id = (await register(agent, body))["id"]
    resp = await agent.client.post(
        f"/api/v1/devices/{fan_id}/commands",
        json={"kind": "fan_speed", "value": 20},
        headers=agent.auth(),
    )
    error = await error_of(resp, 503)
    assert error["code"] == "SERVICE_UNAVAILABLE"
    listed = await agent.client.get(f"/api/v1/devices/{fan_id}/commands", headers=agent.auth())
    commands = (await listed.json())["commands"]
    assert [(c["id"], c["outcome"]) for c in commands] == [
        (error["details"]["command_id"], "unavailable")
    ]


async def test_commands_are_refused_to_whom_may_not_control(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "guarded")
    body = {"kind": "fan_speed", "value": 10}
    read_only = await login_as(rig.agent, "operator", rig.farm_id, "read_only")
    assert (await error_of(await _command(rig, fan_id, body, read_only), 403))["code"] == (
        "FORBIDDEN"
    )
    analyst = await login_as(rig.agent, "analyst", rig.farm_id)
    await error_of(await _command(rig, fan_id, body, analyst), 403)
    stranger = await login_as(rig.agent, "operator")
    await error_of(await _command(rig, fan_id, body, stranger), 404)
    await error_of(await _command(rig, "6f1c1a52-1111-4c1e-8d43-1b2f0b0f9a77", body), 404)
    # Refused commands are not recorded; the analyst may read the (empty) history.
    listed = await rig.agent.client.get(
        f"/api/v1/devices/{fan_id}/commands", headers=rig.agent.auth(analyst)
    )
    assert (await listed.json())["total"] == 0
    operator = await login_as(rig.agent, "operator", rig.farm_id)
    resp = await _command(rig, fan_id, body, operator)
    assert (await resp.json())["outcome"] == "timed_out"


async def test_commands_a_device_cannot_take_are_422(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "f422", max_speed=60)
    sensor_id = await rig.actuator("sensor", "tasmota-sht3x", "s422")
    cases: list[tuple[str, dict[str, Any]]] = [
        (fan_id, {"kind": "power", "value": True}),  # the iFan firmware has no power command
        (fan_id, {"kind": "valve", "value": True}),
        (fan_id, {"kind": "fan_speed", "value": True}),
        (fan_id, {"kind": "fan_speed", "value": 101}),
        (fan_id, {"kind": "fan_speed", "value": "50"}),
        (fan_id, {"kind": "fan_speed", "value": 70}),  # above max_speed
        (fan_id, {"kind": "fan_speed", "value": 5, "force": True}),
        (sensor_id, {"kind": "power", "value": True}),
    ]
    for device_id, body in cases:
        error = await error_of(await _command(rig, device_id, body), 422)
        assert error["code"] == "VALIDATION_ERROR", body
    assert (await rig.get(f"/api/v1/devices/{fan_id}/commands"))["total"] == 0


async def test_a_disabled_device_is_not_commanded(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "off")
    resp = await rig.agent.client.put(
        f"/api/v1/devices/{fan_id}/status", json={"status": "disabled"}, headers=rig.agent.auth()
    )
    assert resp.status == 200
    await error_of(await _command(rig, fan_id, {"kind": "fan_speed", "value": 10}), 409)


async def test_a_manual_command_tells_the_manual_listeners_first(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "heard")
    heard: list[str] = []
    rig.agent.client.app[ACTUATORS].add_manual_listener(heard.append)
    await _command(rig, fan_id, {"kind": "fan_speed", "value": 10})
    assert heard == [fan_id]


class _ReadingsArriveMeanwhile:
    """A device that confirms after a round trip during which a reading batch was queued, as
    a flood's next batch is; the batch counts the command records committed before it ran."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.batch: asyncio.Task[int] | None = None

    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult:  # noqa: ASYNC109
        self.batch = asyncio.create_task(self._db.write(_count_commands, bulk=True))
        await asyncio.sleep(0.05)  # the device's round trip: the database's writer is free
        return CommandResult("confirmed", {"power": True}, {"power": True})


def _count_commands(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM actuator_commands").fetchone()[0])


async def test_a_command_is_recorded_before_a_reading_batch_queued_while_it_ran(
    agent: Agent,
) -> None:
    """A person's command is answered once its record is committed; a batch of readings that
    came in while the device was confirming waits for it (it would otherwise hold the record
    back for its whole run, hundreds of readings)."""
    farm_id = await create_farm(agent)
    body = {
        "name": "Fan",
        "kind": "fan",
        "farm_id": farm_id,
        "profile": "esphome-fan",
        "address": {"transport": "mqtt", "topic_base": "flooded"},
    }
    fan_id = (await register(agent, body))["id"]
    app = agent.client.app
    db = app[DATABASE]
    device = _ReadingsArriveMeanwhile(db)
    actuators = ActuatorService(
        app[DEVICES], DeviceStore(db), ActuatorCommandStore(db), device, timeout=1.0
    )
    record = await actuators.command(None, fan_id, Command("power", True), source="schedule")
    assert record.outcome == "confirmed"
    assert device.batch is not None
    assert await device.batch == 1  # the record was committed before the batch ran


class _FullStore(ActuatorCommandStore):
    """The command store of a card with no room left until the test makes some: each record
    is refused as SQLite refuses it (SQLITE_FULL), and counted."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.full = True
        self.refused = 0
        self.refusing = asyncio.Event()

    async def record(self, command: Any) -> sqlite3.Row:
        if self.full:
            self.refused += 1
            self.refusing.set()
            raise sqlite3.OperationalError("database or disk is full")
        return await super().record(command)


class _Confirms:
    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult:  # noqa: ASYNC109
        return CommandResult("confirmed", {"power": True}, {"power": True})


async def test_a_command_whose_record_finds_the_storage_full_is_recorded_once_there_is_room(
    agent: Agent,
) -> None:
    # The device acts whatever the card says; its record waits for room (up to the command
    # timeout) instead of failing the command: it was a 503 that said nothing had changed.
    farm_id = await create_farm(agent)
    body = {
        "name": "Fan",
        "kind": "fan",
        "farm_id": farm_id,
        "profile": "esphome-fan",
        "address": {"transport": "mqtt", "topic_base": "full-card"},
    }
    fan_id = (await register(agent, body))["id"]
    app = agent.client.app
    db = app[DATABASE]
    store = _FullStore(db)
    actuators = ActuatorService(app[DEVICES], DeviceStore(db), store, _Confirms(), timeout=30.0)
    command = asyncio.create_task(
        actuators.command(None, fan_id, Command("power", True), source="schedule")
    )
    await asyncio.wait_for(store.refusing.wait(), 10)
    store.full = False
    record = await asyncio.wait_for(command, 30)
    assert record.outcome == "confirmed" and store.refused >= 1
    assert await db.fetch_value("SELECT count(*) FROM actuator_commands") == 1

    # Still full when the command's timeout is over: the caller learns the device acted.
    store.full = True
    short = ActuatorService(app[DEVICES], DeviceStore(db), store, _Confirms(), timeout=0.01)
    with pytest.raises(StorageFull, match="outcome is confirmed"):
        await short.command(None, fan_id, Command("power", False), source="schedule")
