"""Actuator control: the command path, fan control and the schedules of actuators."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web

from agent.devices.errors import DeviceUnavailable
from agent.services.control.actuators import ActuatorService
from agent.services.control.fans import ActuatorControl
from agent.services.control.schedules import ActuatorSchedules, is_availability
from agent.settings import AgentSettings
from agent.store.actuator_commands import ActuatorCommandStore
from agent.store.devices import DeviceStore
from agent.web.keys import (
    ACTUATOR_CONTROL,
    ACTUATORS,
    CLOCK_WATCH,
    DATABASE,
    DEVICE_RUNTIME,
    DEVICES,
    EVENT_FANOUT,
    SCHEDULES,
)
from agent.wiring.context import CleanupContext
from agent.wiring.scheduler import SCHEDULER
from protocol.live.outbox import Stream

__all__ = ["control_context", "schedule_timezone"]

log = logging.getLogger(__name__)

# Availability changes waiting for the schedules; a burst larger than this is a gap, not a stall.
_AVAILABILITY_QUEUE = 1000


def schedule_timezone(name: str) -> ZoneInfo:
    """The IANA time zone of schedule windows; a clear start-up error if it is unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"setting timezone: unknown IANA time zone {name!r}") from err


def control_context(settings: AgentSettings) -> CleanupContext:
    """Command actuators and run their schedules for the application's lifetime."""

    async def control(app: web.Application) -> AsyncIterator[None]:
        timezone = schedule_timezone(settings.timezone)
        db = app[DATABASE]
        store = ActuatorCommandStore(db)
        devices = DeviceStore(db)
        actuators = ActuatorService(
            app[DEVICES],
            devices,
            store,
            app[DEVICE_RUNTIME],
            timeout=settings.actuator_command_timeout_s,
        )
        runtime = app[DEVICE_RUNTIME]

        async def connected() -> None:
            # Schedules applied at start-up are sent once the broker connection is up.
            if runtime.control is not None:  # the connection commands go out on
                try:
                    await runtime.control.wait_connected(settings.actuator_command_timeout_s * 3)
                except DeviceUnavailable:
                    log.warning("schedules: broker not connected; applying anyway")

        schedules = ActuatorSchedules(
            actuators,
            app[DEVICES],
            store,
            timezone=timezone,
            ready=connected,
            # A device that comes (back) online is put into its window's state.
            availability=app[EVENT_FANOUT].subscribe(
                Stream.DEVICE_EVENTS, _AVAILABILITY_QUEUE, accept=is_availability
            ),
        )
        app[ACTUATORS] = actuators
        app[SCHEDULES] = schedules
        app[ACTUATOR_CONTROL] = ActuatorControl(actuators, schedules, app[DEVICES], devices, store)
        await schedules.start(app[SCHEDULER])
        app[CLOCK_WATCH].on_jump(lambda jump: schedules.clock_jumped(jump.delta_ms))
        yield
        await schedules.stop()

    return control
