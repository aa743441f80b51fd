"""Fan control (PUT /fans/{id}, the fan control input) and actuator schedules.

Fan ``status``: ``running`` or ``stopped`` (or a bare ``speed_percentage``) set the fan by hand
(mode ``manual``): schedule edges leave it alone until it is handed back, and a climate loop
driving it holds off for its ``manual_hold_s``; ``auto`` hands it back to automation (its
schedule, if enabled, applies at once, and a climate loop's hold ends). A ``schedule`` given
without a manual status also hands the fan to automation, with ``speed_percentage`` as the
speed while the window is open. Everything is checked before anything is stored or sent.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from agent.devices.codec import Command
from agent.services.control.actuators import ActuatorService
from agent.services.control.schedules import ActuatorSchedules, switch_command
from agent.services.devices.registry import DeviceService
from agent.services.devices.views import fan_view
from agent.store.actuator_commands import ActuatorCommandStore, ControlSettings
from agent.store.devices import DeviceStore
from protocol.access import Action
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.actuators import (
    CommandRecord,
    DeviceSchedule,
    FanControl,
    FanControlResult,
    Schedule,
)
from protocol.timefmt import utcnow

__all__ = ["ActuatorControl"]


class ActuatorControl:
    """The use cases of fan control and of actuator schedules."""

    def __init__(
        self,
        actuators: ActuatorService,
        schedules: ActuatorSchedules,
        registry: DeviceService,
        devices: DeviceStore,
        store: ActuatorCommandStore,
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._actuators = actuators
        self._schedules = schedules
        self._registry = registry
        self._devices = devices
        self._store = store
        self._now = now

    async def control_fan(
        self, principal: Principal, fan_id: str, body: FanControl
    ) -> FanControlResult:
        """Apply the fan control input of PUT /fans/{id}; the answer carries the outcome."""
        row = await self._actuators.actuator(principal, fan_id, Action.CONTROL)
        if row["kind"] != "fan":
            raise NotFound("Fan not found")
        _check_speed(row, body.speed_percentage, "speed_percentage")
        settings = await self._store.control(fan_id)
        if body.schedule is not None:
            settings = replace(
                settings,
                schedule_enabled=body.schedule.enabled,
                start_time=body.schedule.start_time,
                end_time=body.schedule.end_time,
                on_value=(
                    body.speed_percentage
                    if body.speed_percentage is not None
                    else settings.on_value
                ),
            )
        manual = body.status in ("running", "stopped") or (
            body.status is None and body.schedule is None
        )
        command: CommandRecord | None
        if manual:
            wanted = self._actuators.checked(row, self._manual_command(row, body, settings))
            await self._schedules.save(replace(settings, mode="manual"))
            command = await self._actuators.command(principal, fan_id, wanted, source="manual")
        else:
            self._actuators.checked(row, self._scheduled_command(row, settings))
            command = await self._schedules.save(replace(settings, mode="auto"))
            self._actuators.announce_auto(fan_id)
        saved = await self._store.control(fan_id)
        fresh = await self._devices.get(fan_id)
        if fresh is None:  # deleted meanwhile
            raise NotFound("Fan not found")
        fan = fan_view(fresh, self._now())
        return FanControlResult(
            **fan.model_dump(),
            mode="manual" if saved.mode == "manual" else "auto",
            schedule=self._schedules.view(saved),
            command=command,
        )

    def _manual_command(
        self, row: sqlite3.Row, body: FanControl, settings: ControlSettings
    ) -> Command:
        profile = self._registry.profile_of(row)
        if body.status == "stopped":
            return switch_command(row, profile, False, None)
        speed = body.speed_percentage
        if speed is None:
            reported = json.loads(row["state"]).get("fan_speed")
            # "running" without a speed: as it was running, else the schedule's or full speed.
            speed = reported if reported else settings.on_value
        if speed == 0:
            return switch_command(row, profile, False, None)
        return switch_command(row, profile, True, speed)

    def _scheduled_command(self, row: sqlite3.Row, settings: ControlSettings) -> Command:
        return switch_command(row, self._registry.profile_of(row), True, settings.on_value)

    async def schedule(self, principal: Principal, device_id: str) -> Schedule:
        """An actuator's schedule and mode."""
        await self._actuators.actuator(principal, device_id, Action.READ)
        return self._schedules.view(await self._store.control(device_id))

    async def set_schedule(
        self, principal: Principal, device_id: str, body: DeviceSchedule
    ) -> Schedule:
        """Set an actuator's daily window and hand it to automation; it applies at once."""
        row = await self._actuators.actuator(principal, device_id, Action.CONTROL)
        _check_speed(row, body.value if row["kind"] == "fan" else None, "value")
        settings = replace(
            await self._store.control(device_id),
            mode="auto",
            schedule_enabled=body.enabled,
            start_time=body.start_time,
            end_time=body.end_time,
            on_value=body.value,
        )
        self._actuators.checked(row, self._scheduled_command(row, settings))
        command = await self._schedules.save(settings)
        self._actuators.announce_auto(device_id)
        return self._schedules.view(await self._store.control(device_id), command)


def _check_speed(row: sqlite3.Row, speed: int | None, field: str) -> None:
    cap = row["max_speed"]
    if speed is not None and cap is not None and speed > cap:
        raise ValidationFailed.of([(field, f"above the fan's max_speed {cap}")])
