"""The Found list, and the MQTT listener feeding it while the devices' broker is in use."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.services.discovery.found import FoundDevices
from agent.services.discovery.listener import DiscoveryListener
from agent.settings import AgentSettings
from agent.store.found_devices import FoundDeviceStore
from agent.web.keys import DATABASE, DEVICE_RUNTIME, DEVICES, FOUND
from agent.wiring.context import CleanupContext

__all__ = ["discovery_context"]


def discovery_context(settings: AgentSettings) -> CleanupContext:
    """Serve /api/v1/discovered-devices and listen for announcements for the app's lifetime."""

    async def discovery(app: web.Application) -> AsyncIterator[None]:
        found = FoundDevices(FoundDeviceStore(app[DATABASE]), app[DEVICES])
        app[FOUND] = found
        runtime = app.get(DEVICE_RUNTIME)
        listener = None
        if settings.mqtt_enabled and runtime is not None and runtime.client is not None:
            listener = DiscoveryListener(
                runtime.client.settings, app[DEVICES].profiles, found.announce
            )
            await listener.start()
        try:
            yield
        finally:
            if listener is not None:
                await listener.stop()

    return discovery
