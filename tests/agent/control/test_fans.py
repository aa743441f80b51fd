"""PUT /fans/{id}: run, stop and set speed with the fan's confirmation; running time it reports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from agent.web.keys import DEVICES
from protocol.timefmt import utcnow
from tests.agent.control.conftest import Rig, start_live
from tests.agent.devices_api.conftest import error_of, login_as
from tests.conftest import Agent


async def _put(rig: Rig, fan_id: str, body: Any, token: str | None = None) -> Any:
    return await rig.agent.client.put(
        f"/api/v1/fans/{fan_id}", json=body, headers=rig.agent.auth(token)
    )


async def _ok(rig: Rig, fan_id: str, body: Any) -> dict[str, Any]:
    resp = await _put(rig, fan_id, body)
    answer: dict[str, Any] = await resp.json()
    assert resp.status == 200, answer
    return answer


async def test_a_fan_runs_and_stops_as_confirmed_by_the_device(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "ifan", rated_power_w=80.0)
    async with rig.simulator("tasmota-ifan", "ifan") as sim:
        await sim.wait_ready(10)
        await rig.online(fan_id)
        # The iFan has 3 speeds: 67 % is speed 2, which it reports back as 67 %.
        answer = await _ok(rig, fan_id, {"status": "running", "speed_percentage": 67})
        assert answer["command"]["outcome"] == "confirmed"
        assert (answer["status"], answer["current_speed"], answer["mode"]) == (
            "running",
            67,
            "manual",
        )
        assert answer["power_consumption"] > 0
        assert sim.state["fan_speed"] == 67
        listed = await rig.fan(fan_id)
        assert (listed["status"], listed["current_speed"]) == ("running", 67)

        answer = await _ok(rig, fan_id, {"status": "stopped"})
        assert answer["command"]["outcome"] == "confirmed"
        assert (answer["status"], answer["current_speed"], answer["power_consumption"]) == (
            "stopped",
            0,
            0.0,
        )
        # A bare speed is a manual setting too.
        answer = await _ok(rig, fan_id, {"speed_percentage": 100})
        assert (answer["current_speed"], answer["command"]["kind"]) == (100, "fan_speed")
    history = await rig.get(f"/api/v1/devices/{fan_id}/commands")
    assert [c["value"] for c in history["commands"]] == [100, 0, 67]


async def test_an_esphome_fan_is_controlled_too(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "esphome-fan", "node1")
    async with rig.simulator("esphome-fan", "node1") as sim:
        await sim.wait_ready(10)
        await rig.online(fan_id)
        answer = await _ok(rig, fan_id, {"status": "running", "speed_percentage": 40})
        assert answer["command"]["outcome"] == "confirmed", answer
        assert answer["current_speed"] == 40


async def test_a_fan_that_stopped_answering_times_out(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "quiet")
    sim = rig.simulator("tasmota-ifan", "quiet")
    await sim.start()
    await sim.wait_ready(10)
    await rig.online(fan_id)
    await sim.stop()
    answer = await _ok(rig, fan_id, {"status": "running", "speed_percentage": 100})
    assert answer["command"]["outcome"] == "timed_out"
    assert answer["current_speed"] == 0


async def test_invalid_fan_control_is_422_and_changes_nothing(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "bad", max_speed=80)
    window = {"enabled": True, "start_time": "22:00", "end_time": "06:00"}
    for body in (
        {},
        {"status": "running", "colour": "red"},
        {"status": "fast"},
        {"speed_percentage": 101},
        {"speed_percentage": -1},
        {"speed_percentage": "50"},
        {"speed_percentage": 90},  # above max_speed
        {"status": "stopped", "speed_percentage": 30},
        {"schedule": {**window, "end_time": "22:00"}},
        {"schedule": {**window, "start_time": "24:00"}},
        {"schedule": {**window, "start_time": "7:00"}},
        {"schedule": {"enabled": True}},
        {"schedule": {**window, "every": "day"}},
    ):
        error = await error_of(await _put(rig, fan_id, body), 422)
        assert error["code"] == "VALIDATION_ERROR", body
    assert (await rig.get(f"/api/v1/devices/{fan_id}/commands"))["total"] == 0
    schedule = await rig.get(f"/api/v1/devices/{fan_id}/schedule")
    assert (schedule["enabled"], schedule["mode"]) == (False, "auto")


async def test_fan_control_is_refused_to_whom_may_not_control(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "guard")
    pump_id = await rig.actuator("pump", "tasmota-relay", "notafan")
    body = {"status": "running"}
    reader = await login_as(rig.agent, "operator", rig.farm_id, "read_only")
    await error_of(await _put(rig, fan_id, body, reader), 403)
    user = await login_as(rig.agent, "user", rig.farm_id)
    await error_of(await _put(rig, fan_id, body, user), 403)
    stranger = await login_as(rig.agent, "farm_manager")
    await error_of(await _put(rig, fan_id, body, stranger), 404)
    await error_of(await _put(rig, pump_id, body), 404)
    await error_of(await _put(rig, "8d0c5a1e-7b44-4a8e-9a55-0d7f4c3b2a11", body), 404)
    await error_of(await _put(rig, "not-a-uuid", body), 422)
    assert (await rig.get(f"/api/v1/devices/{fan_id}/commands"))["total"] == 0


async def test_runtime_accumulates_from_reported_state_and_survives_a_restart(
    make_agent: Callable[..., Awaitable[Agent]], rig: Rig
) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "hours")
    devices = rig.agent.client.app[DEVICES]
    start = utcnow() - timedelta(hours=10)
    # What the fan reported: on for 2 h, off for 3 h, then on again (still running, 5 h so far).
    await devices.record_states(fan_id, {"fan_speed": 100}, start)
    await devices.record_states(fan_id, {"fan_speed": 0}, start + timedelta(hours=2))
    await devices.record_states(fan_id, {"fan_speed": 33}, start + timedelta(hours=5))
    await devices.record_availability(fan_id, True, utcnow())
    assert (await rig.fan(fan_id))["runtime_hours"] == 7

    await rig.agent.client.close()
    agent = await start_live(make_agent, rig.broker)
    restarted = Rig(agent, rig.farm_id, rig.broker)
    fan = await restarted.fan(fan_id)
    # Not heard since the restart: counted up to when it was last heard, not lost.
    assert (fan["status"], fan["runtime_hours"]) == ("offline", 7)
