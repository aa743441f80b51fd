"""An ntfy-compatible HTTP receiver (what Apprise's ``ntfy://`` posts: JSON with ``topic``,
``title`` and ``message`` to the server's root), keeping what it receives. Tests script its
answers (a status for the next N messages) and wait for messages with a generous timeout."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.mosquitto import free_port

__all__ = ["NtfyMessage", "NtfyReceiver"]

_EVENT_LINK = re.compile(r"alerts\?event=([0-9a-f-]{36})")


@dataclass
class NtfyMessage:
    """One message as ntfy would publish it."""

    topic: str
    title: str
    message: str
    headers: dict[str, str]
    at: float
    """``time.perf_counter()`` when it arrived."""


@dataclass
class NtfyReceiver:
    """A server on 127.0.0.1; ``url(topic)`` is the Apprise URL of one topic."""

    port: int = field(default_factory=free_port)
    received: list[NtfyMessage] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)
    """Statuses to answer the next messages with, in order (then 200)."""
    by_event: Counter[str] = field(default_factory=Counter)
    """Messages per event id (from the link a message carries)."""
    _runner: web.AppRunner | None = None
    _changed: asyncio.Condition | None = None

    def url(self, topic: str = "farm") -> str:
        """The contact point URL for ``topic``."""
        return f"ntfy://127.0.0.1:{self.port}/{topic}"

    async def start(self) -> None:
        """Listen."""
        self._changed = asyncio.Condition()
        app = web.Application()
        app.router.add_post("/", self._publish)
        app.router.add_post("/{topic}", self._publish)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _publish(self, request: web.Request) -> web.Response:
        if self.failures:
            status = self.failures.pop(0)
            return web.json_response({"code": status, "error": "scripted failure"}, status=status)
        body: dict[str, Any] = await request.json()
        self.received.append(
            NtfyMessage(
                topic=str(body.get("topic", request.match_info.get("topic", ""))),
                title=str(body.get("title", "")),
                message=str(body.get("message", "")),
                headers=dict(request.headers),
                at=time.perf_counter(),
            )
        )
        if found := _EVENT_LINK.search(self.received[-1].message):
            self.by_event[found.group(1)] += 1
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()
        return web.json_response({"id": str(len(self.received)), "event": "message"})

    async def wait_for(
        self, check: Callable[[list[NtfyMessage]], bool], within: float = 30.0
    ) -> list[NtfyMessage]:
        """Wait until ``check(received)`` holds; a TimeoutError names what arrived."""
        assert self._changed is not None
        try:
            async with asyncio.timeout(within):
                async with self._changed:
                    await self._changed.wait_for(lambda: check(self.received))
        except TimeoutError:
            raise TimeoutError(f"received so far: {[m.title for m in self.received]}") from None
        return self.received
