"""Schedules: daily windows across midnight, applied at start-up, edges across DST changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from agent.services.control.schedule_windows import Window, edges, is_open
from agent.services.control.schedules import ActuatorSchedules
from agent.store.actuator_commands import ActuatorCommandStore
from agent.web.keys import ACTUATORS, DATABASE, DEVICES, SCHEDULES
from tests.agent.control.conftest import Rig, start_live
from tests.agent.devices_api.conftest import error_of
from tests.agent.runtime.conftest import eventually
from tests.conftest import Agent

BERLIN = ZoneInfo("Europe/Berlin")


def _at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 1, day, hour, minute, tzinfo=UTC)


async def _put_schedule(rig: Rig, device_id: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await rig.agent.client.put(
        f"/api/v1/devices/{device_id}/schedule", json=body, headers=rig.agent.auth()
    )
    answer: dict[str, Any] = await resp.json()
    assert resp.status == 200, answer
    return answer


async def test_a_fan_schedule_across_midnight_follows_the_window(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "night")
    async with rig.simulator("tasmota-ifan", "night") as sim:
        await sim.wait_ready(10)
        await rig.online(fan_id)
        resp = await rig.agent.client.put(
            f"/api/v1/fans/{fan_id}",
            json={
                "speed_percentage": 67,
                "schedule": {"enabled": True, "start_time": "22:00", "end_time": "06:00"},
            },
            headers=rig.agent.auth(),
        )
        answer = await resp.json()
        assert resp.status == 200, answer
        assert answer["mode"] == "auto"
        assert answer["schedule"]["timezone"] == "UTC"
        # Applied at once, whatever the time is now.
        assert answer["command"]["source"] == "schedule"

        schedules = rig.agent.client.app[SCHEDULES]
        assert schedules.job_ids(fan_id) == [f"{fan_id}:close", f"{fan_id}:open"]
        expected = [(21, 59, 0), (22, 0, 67), (23, 30, 67), (0, 0, 67), (5, 59, 67), (6, 0, 0)]
        for hour, minute, speed in expected:
            day = 2 if hour < 12 else 1
            record = await schedules.apply_at(fan_id, _at(day, hour, minute))
            assert record is not None
            assert record.outcome == "confirmed"
            assert sim.state["fan_speed"] == speed, (hour, minute)


async def test_a_manual_status_pins_the_fan_until_auto(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "pinned")
    window = {"enabled": True, "start_time": "22:00", "end_time": "06:00"}
    await rig.agent.client.put(
        f"/api/v1/fans/{fan_id}", json={"schedule": window}, headers=rig.agent.auth()
    )
    schedules = rig.agent.client.app[SCHEDULES]
    resp = await rig.agent.client.put(
        f"/api/v1/fans/{fan_id}", json={"status": "stopped"}, headers=rig.agent.auth()
    )
    assert (await resp.json())["mode"] == "manual"
    assert await rig.agent.client.app[ACTUATORS].mode(fan_id) == "manual"
    assert schedules.job_ids(fan_id) == []
    assert await schedules.apply_at(fan_id, _at(1, 23)) is None
    resp = await rig.agent.client.put(
        f"/api/v1/fans/{fan_id}", json={"status": "auto"}, headers=rig.agent.auth()
    )
    answer = await resp.json()
    assert (answer["mode"], answer["schedule"]["enabled"]) == ("auto", True)
    assert answer["command"]["source"] == "schedule"
    assert len(schedules.job_ids(fan_id)) == 2


async def test_a_pump_schedule_is_reloaded_and_applied_after_a_restart(
    make_agent: Callable[..., Awaitable[Agent]], rig: Rig
) -> None:
    pump_id = await rig.actuator("pump", "tasmota-relay", "pump")
    now = datetime.now(UTC)
    # A window open now: it opened an hour ago and closes in an hour (maybe past midnight).
    window = {
        "enabled": True,
        "start_time": (now - timedelta(hours=1)).strftime("%H:%M"),
        "end_time": (now + timedelta(hours=1)).strftime("%H:%M"),
    }
    async with rig.simulator("tasmota-relay", "pump") as sim:
        await sim.wait_ready(10)
        await rig.online(pump_id)
        answer = await _put_schedule(rig, pump_id, window)
        assert answer["active_now"] is True
        assert answer["command"]["outcome"] == "confirmed"
        assert sim.state["power"] is True
        # Switched off by hand (a one-off command does not pin it), then the agent restarts.
        resp = await rig.agent.client.post(
            f"/api/v1/devices/{pump_id}/commands",
            json={"kind": "power", "value": False},
            headers=rig.agent.auth(),
        )
        assert (await resp.json())["outcome"] == "confirmed"
        await rig.agent.client.close()

        agent = await start_live(make_agent, rig.broker)
        assert agent.client.app[SCHEDULES].job_ids(pump_id) == [
            f"{pump_id}:close",
            f"{pump_id}:open",
        ]

        async def switched_on_again() -> list[str] | None:
            # The pump turns on before the agent has recorded the confirmed command.
            resp = await agent.client.get(
                f"/api/v1/devices/{pump_id}/commands", headers=agent.auth()
            )
            sources = [c["source"] for c in (await resp.json())["commands"]]
            return sources if sim.state["power"] is True and len(sources) == 3 else None

        assert await eventually(switched_on_again) == ["schedule", "manual", "schedule"]


async def test_a_schedule_with_equal_edges_is_422(rig: Rig) -> None:
    light_id = await rig.actuator("light", "tasmota-dimmer", "lamp")
    for body in (
        {"enabled": True, "start_time": "08:00", "end_time": "08:00"},
        {"enabled": True, "start_time": "08:00", "end_time": "20:00", "value": 101},
        {"enabled": "yes", "start_time": "08:00", "end_time": "20:00"},
    ):
        resp = await rig.agent.client.put(
            f"/api/v1/devices/{light_id}/schedule", json=body, headers=rig.agent.auth()
        )
        await error_of(resp, 422)
    schedule = await rig.get(f"/api/v1/devices/{light_id}/schedule")
    assert schedule["enabled"] is False


async def test_a_disabled_schedule_sends_nothing(rig: Rig) -> None:
    light_id = await rig.actuator("light", "tasmota-dimmer", "idle")
    answer = await _put_schedule(
        rig, light_id, {"enabled": False, "start_time": "08:00", "end_time": "20:00"}
    )
    assert (answer["command"], answer["active_now"]) == (None, None)
    assert rig.agent.client.app[SCHEDULES].job_ids(light_id) == []
    assert (await rig.get(f"/api/v1/devices/{light_id}/commands"))["total"] == 0


def test_dst_days_have_exactly_one_opening_and_one_closing_edge() -> None:
    # Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
    spring = Window.of("02:30", "05:00")  # opens inside the missing hour
    found = edges(
        spring,
        BERLIN,
        datetime(2026, 3, 28, 22, tzinfo=UTC),
        datetime(2026, 3, 29, 21, tzinfo=UTC),
    )
    assert [opens for _, opens in found] == [True, False]
    assert is_open(spring, BERLIN, datetime(2026, 3, 29, 2, tzinfo=UTC))  # 04:00 CEST

    autumn = Window.of("01:30", "02:45")  # closes inside the repeated hour
    found = edges(
        autumn,
        BERLIN,
        datetime(2026, 10, 24, 21, tzinfo=UTC),
        datetime(2026, 10, 25, 21, tzinfo=UTC),
    )
    assert found == [
        (datetime(2026, 10, 24, 23, 30, tzinfo=UTC), True),  # 01:30 CEST
        (datetime(2026, 10, 25, 0, 45, tzinfo=UTC), False),  # 02:45 CEST, the first one
    ]
    # 02:00-02:45 CET repeats the wall-clock window: it does not open a second time.
    assert not is_open(autumn, BERLIN, datetime(2026, 10, 25, 1, 30, tzinfo=UTC))


def test_a_window_inside_the_missing_hour_stays_closed_that_day() -> None:
    # 02:30-03:00 does not exist on 2026-03-29 in Berlin; the opening edge fires at 03:30 CEST,
    # after the closing one, and must not open the window until the next day.
    gap = Window.of("02:30", "03:00")
    day = (datetime(2026, 3, 28, 22, tzinfo=UTC), datetime(2026, 3, 29, 21, tzinfo=UTC))
    assert [opens for _, opens in edges(gap, BERLIN, *day)] == [False]
    for hour in (2, 6, 12, 20):  # 04:00 ... 22:00 CEST
        assert not is_open(gap, BERLIN, datetime(2026, 3, 29, hour, tzinfo=UTC))
    assert is_open(gap, BERLIN, datetime(2026, 3, 30, 0, 45, tzinfo=UTC))  # 02:45 CEST next day


async def test_a_repeated_edge_in_the_fall_back_hour_is_not_applied(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "dst")
    await _put_schedule(
        rig, fan_id, {"enabled": True, "start_time": "02:30", "end_time": "04:00", "value": 100}
    )
    app = rig.agent.client.app
    clock = [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]  # 02:30 CEST, the first 02:30
    schedules = ActuatorSchedules(
        app[ACTUATORS],
        app[DEVICES],
        ActuatorCommandStore(app[DATABASE]),
        timezone=BERLIN,
        now=lambda: clock[0],
    )
    before = (await rig.get(f"/api/v1/devices/{fan_id}/commands"))["total"]
    await schedules.edge(fan_id, opens=True)
    first = await rig.get(f"/api/v1/devices/{fan_id}/commands")
    assert first["total"] == before + 1
    assert (first["commands"][0]["value"], first["commands"][0]["source"]) == (100, "schedule")
    clock[0] = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET, the same edge again
    await schedules.edge(fan_id, opens=True)
    assert (await rig.get(f"/api/v1/devices/{fan_id}/commands"))["total"] == before + 1


async def test_a_light_schedule_sets_its_brightness_while_open(rig: Rig) -> None:
    light_id = await rig.actuator("light", "tasmota-dimmer", "grow")
    now = datetime.now(UTC)
    window = {
        "enabled": True,
        "start_time": (now - timedelta(hours=2)).strftime("%H:%M"),
        "end_time": (now + timedelta(hours=2)).strftime("%H:%M"),
        "value": 40,
    }
    async with rig.simulator("tasmota-dimmer", "grow") as sim:
        await sim.wait_ready(10)
        await rig.online(light_id)
        answer = await _put_schedule(rig, light_id, window)
        assert (answer["command"]["kind"], answer["command"]["value"]) == ("brightness", 40)
        assert answer["command"]["outcome"] == "confirmed"
        assert sim.state["brightness"] == 40
        schedules = rig.agent.client.app[SCHEDULES]
        record = await schedules.apply_at(light_id, now + timedelta(hours=3))
        assert record is not None
        assert (record.kind, record.value, record.outcome) == ("brightness", 0, "confirmed")


async def test_disabling_a_device_stops_its_schedule_until_it_is_enabled(rig: Rig) -> None:
    pump_id = await rig.actuator("pump", "tasmota-relay", "paused")
    await _put_schedule(rig, pump_id, {"enabled": True, "start_time": "06:00", "end_time": "07:00"})
    schedules = rig.agent.client.app[SCHEDULES]
    assert len(schedules.job_ids(pump_id)) == 2
    for status, jobs in (("disabled", 0), ("active", 2)):
        resp = await rig.agent.client.put(
            f"/api/v1/devices/{pump_id}/status", json={"status": status}, headers=rig.agent.auth()
        )
        assert resp.status == 200
        assert len(schedules.job_ids(pump_id)) == jobs


async def test_a_device_offline_at_start_up_gets_its_window_state_when_it_comes_online(
    make_agent: Callable[..., Awaitable[Agent]], rig: Rig
) -> None:
    pump_id = await rig.actuator("pump", "tasmota-relay", "late")
    now = datetime.now(UTC)
    window = {
        "enabled": True,
        "start_time": (now - timedelta(hours=1)).strftime("%H:%M"),
        "end_time": (now + timedelta(hours=1)).strftime("%H:%M"),
    }
    await _put_schedule(rig, pump_id, window)  # the pump is not there: timed out
    await rig.agent.client.close()

    agent = await start_live(make_agent, rig.broker)

    async def outcomes(count: int) -> list[str] | None:
        resp = await agent.client.get(f"/api/v1/devices/{pump_id}/commands", headers=agent.auth())
        found = [c["outcome"] for c in (await resp.json())["commands"]]
        return found if len(found) >= count else None

    # Start-up applied the window, but nobody answered.
    assert await eventually(lambda: outcomes(2)) == ["timed_out", "timed_out"]
    async with rig.simulator("tasmota-relay", "late") as sim:
        await sim.wait_ready(10)
        assert sim.state["power"] is False

        async def switched_on() -> bool:
            return sim.state["power"] is True

        await eventually(switched_on)
    assert await eventually(lambda: outcomes(3)) == ["confirmed", "timed_out", "timed_out"]


async def test_after_a_clock_jump_the_window_state_is_applied_once(rig: Rig) -> None:
    """A Pi that booted two days behind (issue 30): when NTP sets the clock, the light gets the
    state its window wants now, once; the edge the jump landed just after is not applied again,
    and the switchings of the two days are not replayed."""
    light_id = await rig.actuator("light", "tasmota-relay", "jump")
    await _put_schedule(
        rig, light_id, {"enabled": True, "start_time": "12:00", "end_time": "20:00"}
    )
    app = rig.agent.client.app
    clock = [_at(1, 3)]  # the saved time at boot: the window is closed
    schedules = ActuatorSchedules(
        app[ACTUATORS],
        app[DEVICES],
        ActuatorCommandStore(app[DATABASE]),
        timezone=ZoneInfo("UTC"),
        now=lambda: clock[0],
    )
    await schedules.apply_at(light_id, clock[0])
    before = (await rig.get(f"/api/v1/devices/{light_id}/commands"))["total"]

    clock[0] = _at(3, 12, 5)  # NTP: two days later, five minutes into the window
    await schedules.clock_jumped(2 * 86_400_000)
    await schedules.edge(light_id, opens=True)  # the scheduler fires the edge within its grace
    await schedules.clock_jumped(0)
    commands = await rig.get(f"/api/v1/devices/{light_id}/commands")
    assert commands["total"] == before + 1
    assert commands["commands"][0]["source"] == "schedule"
