"""Climate control: the loop's runtime, the service, and the fan driver over the actuators."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from agent.devices.codec import Command
from agent.services.climate.runtime import ClimateRuntime
from agent.services.climate.service import ClimateService
from agent.services.clock_watch import Jump
from agent.services.control.actuators import ActuatorService
from agent.settings import AgentSettings
from agent.store.climate import ClimateStore
from agent.web.keys import (
    ACTUATORS,
    CLIMATE,
    CLIMATE_RUNTIME,
    CLOCK_WATCH,
    DATABASE,
    EVENT_FANOUT,
    READINGS,
    SCHEDULES,
)
from agent.wiring.context import CleanupContext
from protocol.errors import ApiError

__all__ = ["ActuatorFanDriver", "climate_context"]

log = logging.getLogger(__name__)


class ActuatorFanDriver:
    """Commands fans through the actuator service, so every loop command is stored."""

    def __init__(self, actuators: ActuatorService) -> None:
        self._actuators = actuators

    async def set_fan_speed(self, device_id: str, percent: int) -> bool:
        """Send ``fan_speed`` and report whether the fan confirmed it."""
        try:
            record = await self._actuators.command(
                None, device_id, Command("fan_speed", percent), source="climate"
            )
        except ApiError as err:  # a fan deleted, disabled or re-profiled under the loop
            log.warning("climate: fan %s not commanded: %s", device_id, err.message)
            return False
        # "unconfirmed": the firmware reports no state for it; the command was sent all the same.
        return record.outcome in ("confirmed", "unconfirmed")


def climate_context(settings: AgentSettings, *, clock: Callable[[], float]) -> CleanupContext:
    """Run the climate loops for the application's lifetime."""

    async def climate(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        store = ClimateStore(db)
        runtime = ClimateRuntime(
            store,
            ActuatorFanDriver(app[ACTUATORS]),
            app[READINGS].writer,
            app[EVENT_FANOUT].publish,
            now=clock,
            interval_s=settings.climate_interval_s,
        )
        app[CLIMATE] = ClimateService(db, store, runtime)
        app[CLIMATE_RUNTIME] = runtime
        # A person's command holds the loop off that fan; the loop's fans are not scheduled.
        app[ACTUATORS].add_manual_listener(runtime.manual_command)
        app[ACTUATORS].add_auto_listener(runtime.handed_back)
        app[SCHEDULES].yield_to(runtime.drives)

        async def clock_jumped(jump: Jump) -> None:
            runtime.clock_jumped(jump.delta_ms)

        app[CLOCK_WATCH].on_jump(clock_jumped)
        await runtime.start()
        yield
        await runtime.stop()

    return climate
