"""The requests being answered right now, so that background work can step aside for them.

A farm's person waits on an HTTP answer (a fan command, the farm list); a flood of telemetry
does not wait on anything: QoS 1 messages stay in the broker until they are acknowledged. While
a request is in progress the MQTT dispatcher pauses the telemetry lane for a bounded time
(``agent.devices.mqtt``), which keeps the event loop short for the request, and the reading
writer cuts its batches short. While no request has come for a while (:meth:`Foreground.quiet`)
the writer commits in larger batches: nobody waits behind them. WebSocket streams are
long-lived and are not counted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["Foreground", "foreground_middleware"]


class Foreground:
    """How many HTTP requests are being answered, and since when none has been."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.active = 0
        self._clock = clock
        self._last_end = -math.inf

    def busy(self) -> bool:
        """True while a request is being answered."""
        return self.active > 0

    def quiet(self, seconds: float) -> bool:
        """True when no request is being answered and none was for ``seconds``."""
        return self.active == 0 and self._clock() - self._last_end >= seconds

    def begin(self) -> None:
        """A request's handler starts."""
        self.active += 1

    def end(self) -> None:
        """A request's handler is done."""
        self.active -= 1
        self._last_end = self._clock()


def foreground_middleware(foreground: Foreground) -> Middleware:
    """Count every request except WebSocket upgrades while its handler runs."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await handler(request)
        foreground.begin()
        try:
            return await handler(request)
        finally:
            foreground.end()

    return middleware
