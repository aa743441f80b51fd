"""A webhook receiver as an integrator would write one: it verifies every message with the
reference Standard Webhooks library (``standardwebhooks``), and counts deliveries by
``webhook-id``. Tests script its answers (a status for the next N messages, a delay)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.support.mosquitto import free_port

__all__ = ["Received", "WebhookReceiver", "delivery_states", "seed_alert_events"]


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
    answered_at: list[float] = field(default_factory=list)
    """``time.perf_counter()`` of each 2xx answer, in order."""
    rejected: int = 0
    failures: list[int] = field(default_factory=list)
    """Statuses to answer the next messages with, in order (then 204)."""
    delay_s: float = 0.0
    _runner: web.AppRunner | None = None
    _verifier: tuple[str, Webhook] | None = None
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
            if self._verifier is None or self._verifier[0] != self.secret:
                self._verifier = (self.secret, Webhook(self.secret))
            try:
                self._verifier[1].verify(body, headers)
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
        self.answered_at.append(time.perf_counter())
        return web.Response(status=204)

    def forget(self) -> None:
        """Forget every message received so far (a new run begins)."""
        self.received.clear()
        self.answered_ok.clear()
        self.answered_at.clear()

    async def wait_for_ids(self, ids: set[str], timeout: float = 20.0) -> None:  # noqa: ASYNC109
        """Until every id of ``ids`` was answered 2xx."""
        async with asyncio.timeout(timeout):
            while not ids <= set(self.answered_ok):
                self.arrived.clear()
                await self.arrived.wait()

    async def wait_for(self, count: int, timeout: float = 20.0) -> None:  # noqa: ASYNC109
        """Until ``count`` messages were answered 2xx."""
        async with asyncio.timeout(timeout):
            while sum(self.answered_ok.values()) < count:
                self.arrived.clear()
                await self.arrived.wait()


def seed_alert_events(database: Path, farm_id: str, count: int) -> None:
    """Write ``count`` alert_raised events into a stopped agent's database in one transaction,
    as its event log writes them: the agent's trigger queues their deliveries with them."""
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = [
        (
            str(uuid.uuid4()),
            farm_id,
            "alert_raised",
            "critical",
            f"temperature {30 + n % 10} above 30",
            json.dumps({"metric": "temperature", "raised_value": 30 + n % 10, "n": n}),
            stamp,
        )
        for n in range(count)
    ]
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn, conn:
        conn.executemany(
            "INSERT INTO events (id, farm_id, kind, severity, message, data, ts)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def delivery_states(database: Path) -> dict[str, str]:
    """Every delivery's id and status in an agent's database."""
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn:
        return dict(conn.execute("SELECT id, status FROM webhook_deliveries").fetchall())
