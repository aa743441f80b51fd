"""Climate control: the loop's runtime, the service, and the fan driver over the device runtime."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from agent.devices.codec import Command
from agent.devices.errors import DeviceUnavailable
from agent.services.climate import ClimateService
from agent.services.climate_runtime import ClimateRuntime
from agent.services.device_runtime import DeviceRuntime
from agent.settings import AgentSettings
from agent.store.climate import ClimateStore
from agent.web.keys import CLIMATE, CLIMATE_RUNTIME, DATABASE, DEVICE_RUNTIME, EVENT_HUB, READINGS
from agent.wiring.context import CleanupContext

__all__ = ["RuntimeFanDriver", "climate_context"]

log = logging.getLogger(__name__)


class RuntimeFanDriver:
    """Commands fans straight through the device runtime (until ActuatorService takes over)."""

    def __init__(self, runtime: DeviceRuntime, timeout: float) -> None:
        self._runtime = runtime
        self._timeout = timeout

    async def set_fan_speed(self, device_id: str, percent: int) -> bool:
        """Send ``fan_speed`` and report whether the fan confirmed it."""
        try:
            result = await self._runtime.send(
                device_id, Command("fan_speed", percent), self._timeout
            )
        except (DeviceUnavailable, ValueError) as err:
            log.warning("climate: fan %s not commanded: %s", device_id, err)
            return False
        return result.outcome == "confirmed"


def climate_context(settings: AgentSettings, *, clock: Callable[[], float]) -> CleanupContext:
    """Run the climate loops for the application's lifetime."""

    async def climate(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        store = ClimateStore(db)
        runtime = ClimateRuntime(
            store,
            RuntimeFanDriver(app[DEVICE_RUNTIME], settings.climate_command_timeout_s),
            app[READINGS].writer,
            app[EVENT_HUB].publish,
            now=clock,
            interval_s=settings.climate_interval_s,
        )
        app[CLIMATE] = ClimateService(db, store, runtime)
        app[CLIMATE_RUNTIME] = runtime
        await runtime.start()
        yield
        await runtime.stop()

    return climate
