"""One authenticated stream client: its filter, its outbox, and the tasks that serve it.

Four owned tasks run per connection and the first to end ends them all: the sender (outbox to
socket, heartbeats), the reader (client messages), the re-checker (credentials and visible farms
every ``recheck_s``, so a revoked session or permission takes effect while connected) and a
watcher of the service's shutdown. Whatever ends the connection says how, as a
:class:`StreamClosed`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from protocol.identity import Principal
from protocol.live.auth import Credential, StreamAuthenticator
from protocol.live.fanout import StreamFanout
from protocol.live.outbox import Missed, Outbox, Stream, StreamEvent
from protocol.live.scope import FarmVisibility, StreamScope
from protocol.streams import (
    CLOSE_FORBIDDEN,
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL,
    CLOSE_NORMAL,
    AuthMessage,
    PingMessage,
    StreamClosed,
    SubscribeMessage,
    batch_prefix,
    frame_prefix,
    id_strings,
    parse_client_message,
    with_seq,
)
from protocol.timefmt import utcnow

__all__ = ["Socket", "StreamConnection", "StreamFilter", "StreamLimits"]

log = logging.getLogger(__name__)

_BURST = 256
"""Messages sent per wake-up at most, so one client's backlog cannot hog the event loop."""
_BATCHED = "reading"
"""The event type a ``batch_ms`` subscription receives in ``readings`` messages."""
_BATCH_MAX = 5000
"""Readings in one ``readings`` message at most (a 5 s batch of a 1,000 readings/s farm)."""


class Socket(Protocol):
    """The client's WebSocket, as the streams use it."""

    async def send_text(self, text: str) -> None:
        """Send one message; raises StreamClosed when the client is gone or too slow."""
        ...

    async def send_texts(self, texts: Sequence[str]) -> None:
        """Send several messages in order, in one write; raises StreamClosed like send_text."""
        ...

    async def receive_text(self) -> str | None:
        """The next text message, or None once the client has closed."""
        ...

    async def close(self, code: int, reason: str) -> None:
        """Close with ``code``; never raises."""
        ...


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """Per-connection figures from the settings (``ws_*``)."""

    max_connections_per_user: int = 10
    heartbeat_s: float = 20.0
    queue_size: int = 1000
    auth_timeout_s: float = 5.0
    recheck_s: float = 5.0


@dataclass(frozen=True, slots=True)
class StreamFilter:
    """What a client subscribed to; None means everything visible."""

    farm_id: str | None = None
    device_ids: frozenset[str] | None = None
    metrics: frozenset[str] | None = None
    batch_ms: int | None = None

    def matches(self, event: StreamEvent) -> bool:
        """Whether ``event`` passes this filter (visibility aside)."""
        if self.farm_id is not None and event.farm_id != self.farm_id:
            return False
        if (
            self.device_ids is not None
            and event.device_id is not None
            and event.device_id not in self.device_ids
        ):
            return False
        return self.metrics is None or event.metric is None or event.metric in self.metrics

    def describe(self) -> dict[str, Any]:
        """The filter as the ``subscribed`` message echoes it (``batch_ms`` only when asked)."""
        described: dict[str, Any] = {
            "farm_id": self.farm_id,
            "device_ids": None if self.device_ids is None else sorted(self.device_ids),
            "metrics": None if self.metrics is None else sorted(self.metrics),
        }
        if self.batch_ms is not None:
            described["batch_ms"] = self.batch_ms
        return described


class StreamConnection:
    """Serves one stream to one authenticated client until something ends it."""

    def __init__(
        self,
        stream: Stream,
        socket: Socket,
        principal: Principal,
        credential: Credential,
        visibility: FarmVisibility,
        *,
        fanout: StreamFanout,
        scope: StreamScope,
        authenticator: StreamAuthenticator,
        limits: StreamLimits,
        going_away: asyncio.Event,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._stream = stream
        self._socket = socket
        self._principal = principal
        self._credential = credential
        self._visibility = visibility
        self._fanout = fanout
        self._scope = scope
        self._authenticator = authenticator
        self._limits = limits
        self._going_away = going_away
        self._clock = clock
        self._filter = StreamFilter()
        self._seq = 0
        self._send_lock = asyncio.Lock()
        self._last_sent = 0.0

    def wants(self, event: StreamEvent) -> bool:
        """Whether this client may and wants to receive ``event`` now."""
        return self._visibility.allows(event.farm_id) and self._filter.matches(event)

    async def run(self) -> StreamClosed:
        """Serve until the client leaves, loses access or the service stops; how it ended."""
        outbox = self._fanout.subscribe(self._stream, self._limits.queue_size, self.wants)
        try:
            await self._send(
                "ready",
                None,
                {
                    "stream": self._stream.value,
                    "user_id": self._principal.user_id,
                    "role": self._principal.role.value,
                },
            )
            return await self._supervise(
                self._sender(outbox), self._reader(), self._recheck(), self._shutdown()
            )
        finally:
            outbox.close()

    async def _supervise(self, *jobs: Coroutine[Any, Any, None]) -> StreamClosed:
        tasks = [asyncio.create_task(job) for job in jobs]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            error = task.exception()
            if isinstance(error, StreamClosed):
                return error
            if error is not None:
                log.error("stream %s failed", self._stream.value, exc_info=error)
                return StreamClosed(CLOSE_INTERNAL, "internal error")
        return StreamClosed(CLOSE_NORMAL, "closed by the client")

    async def _send(self, type_: str, farm_id: str | None, data: dict[str, Any]) -> None:
        await self._send_encoded(frame_prefix(type_, farm_id, data, self._clock()))

    async def _send_encoded(self, prefix: str) -> None:
        async with self._send_lock:
            self._seq += 1
            await self._socket.send_text(with_seq(prefix, self._seq))
            self._last_sent = asyncio.get_running_loop().time()

    async def _sender(self, outbox: Outbox) -> None:
        loop = asyncio.get_running_loop()
        while True:
            idle = self._last_sent + self._limits.heartbeat_s - loop.time()
            if idle <= 0:
                await self._send("heartbeat", None, {})
                continue
            try:
                async with asyncio.timeout(idle):
                    await outbox.wait()
            except TimeoutError:
                continue
            batch_ms = self._filter.batch_ms
            if batch_ms is not None:
                # Readings that arrive meanwhile join the batch: one message per period.
                await asyncio.sleep(self._last_sent + batch_ms / 1000 - loop.time())
                await self._send_batched(outbox)
                continue
            await self._send_burst(outbox)
            if outbox.pending():
                await asyncio.sleep(0)  # a long backlog goes out in turns with other clients

    async def _send_burst(self, outbox: Outbox) -> None:
        """Send what is waiting (up to a burst): one lock, one socket write, no task switch."""
        prefixes: list[str] = []
        while len(prefixes) < _BURST:
            item = outbox.get_nowait()
            if item is None:
                break
            if isinstance(item, Missed):
                prefixes.append(frame_prefix("missed", None, {"count": item.count}, self._clock()))
            elif self.wants(item):
                # Checked again: access or the filter may have changed while it was queued.
                prefixes.append(item.encoded())
        if prefixes:
            await self._send_prefixes(prefixes)

    async def _send_batched(self, outbox: Outbox) -> None:
        """Send what is waiting with runs of readings folded into ``readings`` messages; a gap
        marker or another event ends a run, so ``missed`` stays where the gap is."""
        prefixes: list[str] = []
        run: list[str] = []

        def end_run() -> None:
            if run:
                prefixes.append(batch_prefix(self._filter.farm_id, run, self._clock()))
                run.clear()

        while len(prefixes) < _BURST:
            item = outbox.get_nowait()
            if item is None:
                break
            if isinstance(item, Missed):
                end_run()
                prefixes.append(frame_prefix("missed", None, {"count": item.count}, self._clock()))
            elif not self.wants(item):
                continue
            elif item.type == _BATCHED:
                run.append(item.batch_item())
                if len(run) >= _BATCH_MAX:
                    end_run()
            else:
                end_run()
                prefixes.append(item.encoded())
        end_run()
        if prefixes:
            await self._send_prefixes(prefixes)

    async def _send_prefixes(self, prefixes: list[str]) -> None:
        async with self._send_lock:
            texts = []
            for prefix in prefixes:
                self._seq += 1
                texts.append(with_seq(prefix, self._seq))
            await self._socket.send_texts(texts)
            self._last_sent = asyncio.get_running_loop().time()

    async def _reader(self) -> None:
        # No timeout here on purpose: a quiet client is normal, and a dead one is found by the
        # sender, whose heartbeats fail or time out.
        while True:
            text = await self._socket.receive_text()
            if text is None:
                return
            try:
                message = parse_client_message(text)
            except ValueError as err:
                await self._send("rejected", None, {"message": str(err)})
                continue
            if isinstance(message, SubscribeMessage):
                await self._subscribe(message)
            elif isinstance(message, PingMessage):
                await self._send("pong", None, {})
            elif isinstance(message, AuthMessage):
                await self._send("rejected", None, {"message": "already authenticated"})

    async def _subscribe(self, message: SubscribeMessage) -> None:
        farm_id = None if message.farm_id is None else str(message.farm_id)
        if farm_id is not None:
            if await self._scope.grant(self._principal, farm_id) is None:
                raise StreamClosed(CLOSE_FORBIDDEN, "farm not visible")
            # A permission granted since the last re-check counts at once.
            self._visibility = await self._scope.visibility(self._principal)
        self._filter = StreamFilter(
            farm_id=farm_id,
            device_ids=id_strings(message.device_ids),
            metrics=None if message.metrics is None else frozenset(message.metrics),
            batch_ms=message.batch_ms,
        )
        await self._send("subscribed", farm_id, self._filter.describe())

    async def _recheck(self) -> None:
        while True:
            await asyncio.sleep(self._limits.recheck_s)
            self._principal = await self._authenticator.resolve(self._credential)
            self._visibility = await self._scope.visibility(self._principal)
            farm_id = self._filter.farm_id
            if farm_id is not None and not self._visibility.allows(farm_id):
                raise StreamClosed(CLOSE_FORBIDDEN, "farm no longer visible")

    async def _shutdown(self) -> None:
        await self._going_away.wait()
        raise StreamClosed(CLOSE_GOING_AWAY, "server shutting down")
