"""A webhook receiver as an integrator would write one: it verifies every message with the
reference Standard Webhooks library (``standardwebhooks``), and counts deliveries by
``webhook-id``. Tests script its answers (a status for the next N messages, a delay)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.support.mosquitto import free_port

__all__ = ["Received", "WebhookReceiver"]


@dataclass
class Received:
    """One verified message."""

    id: str
    timestamp: int
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class WebhookReceiver:
    """An HTTP server on 127.0.0.1 accepting signed messages at ``/hook``."""

    secret: str | None = None
    port: int = field(default_factory=free_port)
    received: list[Received] = field(default_factory=list)
    answered_ok: Counter[str] = field(default_factory=Counter)
    """Messages per webhook-id this receiver answered 2xx."""
    rejected: int = 0
    failures: list[int] = field(default_factory=list)
    """Statuses to answer the next messages with, in order (then 204)."""
    delay_s: float = 0.0
    _runner: web.AppRunner | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        """Where webhooks should post."""
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> None:
        """Listen."""
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        app.router.add_post("/redirect", self._redirect)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _redirect(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/hook")

    async def _hook(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = dict(request.headers)
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, headers)
            except WebhookVerificationError:
                self.rejected += 1
                return web.Response(status=401)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        msg_id = request.headers["webhook-id"]
        self.received.append(
            Received(
                msg_id,
                int(request.headers["webhook-timestamp"]),
                json.loads(body),
                {k.lower(): v for k, v in headers.items()},
            )
        )
        self.arrived.set()
        if self.failures:
            return web.Response(status=self.failures.pop(0))
        self.answered_ok[msg_id] += 1
        return web.Response(status=204)

    async def wait_for(self, count: int, timeout: float = 20.0) -> None:  # noqa: ASYNC109
        """Until ``count`` messages were answered 2xx."""
        async with asyncio.timeout(timeout):
            while sum(self.answered_ok.values()) < count:
                self.arrived.clear()
                await self.arrived.wait()
