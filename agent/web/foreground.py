"""The requests being answered right now, so that background work can step aside for them.

A farm's person waits on an HTTP answer (a fan command, the farm list); a flood of telemetry
does not wait on anything: QoS 1 messages stay in the broker until they are acknowledged. While
a request is in progress the MQTT dispatcher pauses the telemetry lane for a bounded time
(``agent.devices.mqtt``), which keeps the event loop short for the request. WebSocket streams
are long-lived and are not counted.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["Foreground", "foreground_middleware"]


class Foreground:
    """How many HTTP requests are being answered."""

    def __init__(self) -> None:
        self.active = 0

    def busy(self) -> bool:
        """True while a request is being answered."""
        return self.active > 0


def foreground_middleware(foreground: Foreground) -> Middleware:
    """Count every request except WebSocket upgrades while its handler runs."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await handler(request)
        foreground.active += 1
        try:
            return await handler(request)
        finally:
            foreground.active -= 1

    return middleware
