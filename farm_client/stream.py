"""One WebSocket stream kept open: authenticate, subscribe, read, and reconnect with back-off.

The server side is agent/services/stream_*.py (docs/design.md section 7). Close codes 4401
(unauthenticated) and 4403 (forbidden) are final: retrying cannot help, except that a 4401 on a
login session is worth one token refresh, since access tokens expire while a stream stays open.
4429 (too many connections) and every other loss are retried with jittered exponential back-off,
the filter is sent again on every new connection, and the caller is told what it may have missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import aiohttp

from farm_client.errors import StreamClosedError
from farm_client.events import Missed
from farm_client.transport import Transport

__all__ = ["CLOSE_FORBIDDEN", "CLOSE_TOO_MANY", "CLOSE_UNAUTHENTICATED", "EventStream", "Reconnect"]

log = logging.getLogger(__name__)

E = TypeVar("E")

# docs/design.md section 7's private close codes (RFC 6455 section 7.4.2 range 4000-4999).
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY = 4429
_FINAL = (CLOSE_UNAUTHENTICATED, CLOSE_FORBIDDEN)
# An upgrade refused with these will be refused again: wrong path, or not allowed in at all.
_FINAL_HTTP = (401, 403, 404)
# Messages that keep the connection alive or acknowledge the client, not events.
_CONTROL = frozenset({"ready", "subscribed", "heartbeat", "pong"})


@dataclass(frozen=True, slots=True)
class Reconnect:
    """Back-off between connection attempts: ``initial_s`` doubling up to ``max_s``, jittered.

    ``max_attempts`` consecutive failures end the stream (None: retry forever).
    ``silence_s`` is how long a connection may stay quiet: the agent sends a heartbeat every
    20 s (docs/design.md section 7), so a longer silence means the connection is dead.
    """

    initial_s: float = 0.5
    max_s: float = 30.0
    max_attempts: int | None = None
    silence_s: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt`` (1-based): half fixed, half random."""
        ceiling = min(self.max_s, self.initial_s * 2.0 ** max(0, attempt - 1))
        # Random jitter spreads the reconnections of many clients after an agent restart.
        return ceiling / 2 + random.uniform(0, ceiling / 2)


class _Dropped(Exception):
    """The connection ended with ``code`` (None when no close frame came)."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"{code} {reason}")
        self.code = code
        self.reason = reason


class EventStream(Generic[E]):
    """Typed events of one stream, plus :class:`Missed` notices; an async iterator.

    Use ``async with`` (or call :meth:`aclose`) so the connection is closed when you stop early.
    ``connections`` counts successful connections; :meth:`wait_connected` waits for one.
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        subscription: dict[str, Any],
        parse: Callable[[dict[str, Any]], E | None],
        reconnect: Reconnect,
        on_connected: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self._transport = transport
        self._on_connected = on_connected
        self._path = path
        self._subscription = {
            key: value for key, value in subscription.items() if value is not None
        }
        self._parse = parse
        self._reconnect = reconnect
        self._generator: AsyncGenerator[E | Missed, None] | None = None
        self._changed = asyncio.Event()
        self._failures = 0
        self.connections = 0
        """Connections that reached the subscribed state so far."""
        self.connected = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> E | Missed:
        if self._generator is None:
            self._generator = self._run()
        return await self._generator.__anext__()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and end the iteration."""
        generator, self._generator = self._generator, None
        if generator is not None:
            await generator.aclose()

    async def wait_connected(self, count: int = 1) -> None:
        """Return once ``count`` connections have been made and one is subscribed now."""
        while not (self.connected and self.connections >= count):
            self._changed.clear()
            await self._changed.wait()

    def _set_connected(self, connected: bool) -> None:
        if connected:
            self.connections += 1
            self._failures = 0
        self.connected = connected
        self._changed.set()

    async def _run(self) -> AsyncGenerator[E | Missed, None]:
        refreshed_at = -1  # connection count at the last refresh after a 4401
        while True:
            reconnecting = self.connections > 0
            try:
                async with contextlib.aclosing(self._connection(reconnecting)) as events:
                    async for item in events:
                        yield item
                ending = _Dropped(None, "connection lost")
            except _Dropped as dropped:
                ending = dropped
            except (aiohttp.ClientError, ConnectionError) as err:
                ending = _Dropped(None, str(err) or type(err).__name__)
            finally:
                if self.connected:
                    self._set_connected(False)
            if ending.code in _FINAL:
                # One refresh per successful connection: an expired token is renewable, a
                # revoked session or a bad key is not.
                if (
                    ending.code == CLOSE_UNAUTHENTICATED
                    and refreshed_at != self.connections
                    and await self._renew()
                ):
                    refreshed_at = self.connections
                    continue
                raise StreamClosedError(ending.code or 0, ending.reason)
            self._failures += 1
            limit = self._reconnect.max_attempts
            if limit is not None and self._failures >= limit:
                raise StreamClosedError(
                    ending.code or 0, f"gave up after {self._failures} attempts"
                )
            delay = self._reconnect.delay(self._failures)
            log.info(
                "stream %s lost (%s %s), reconnecting in %.1f s",
                self._path,
                ending.code,
                ending.reason,
                delay,
            )
            await asyncio.sleep(delay)

    async def _renew(self) -> bool:
        credentials = self._transport.credentials
        if credentials is None:
            return False
        used = await credentials.headers(self._transport)
        return await credentials.renew(self._transport, used)

    async def _connection(self, reconnecting: bool) -> AsyncGenerator[E | Missed, None]:
        """Events of one connection; raises _Dropped when it ends."""
        transport = self._transport
        headers = (
            await transport.credentials.headers(transport)
            if transport.credentials is not None
            else {}
        )
        try:
            async with asyncio.timeout(transport.timeout.total):
                ws = await transport.http.ws_connect(
                    transport.base_url + self._path, headers=headers, autoping=True
                )
        except aiohttp.WSServerHandshakeError as err:
            if err.status in _FINAL_HTTP:
                raise StreamClosedError(err.status, f"upgrade refused: {err.message}") from err
            raise _Dropped(None, f"upgrade refused: {err.status} {err.message}") from None
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise _Dropped(None, f"cannot connect: {err or type(err).__name__}") from None
        async with ws:
            reader = _Reader(ws, self._reconnect.silence_s)
            await reader.expect("ready")
            await ws.send_json({"type": "subscribe", **self._subscription})
            # Events sent before the acknowledgement were chosen by the previous filter.
            await reader.expect("subscribed")
            self._set_connected(True)
            if self._on_connected is not None:
                await self._on_connected(self.connections)
            if reconnecting:
                yield Missed(None, "reconnect")
            while True:
                message = await reader.next()
                if reader.gap:
                    yield Missed(reader.gap, "sequence")
                kind = message.get("type")
                if kind in _CONTROL:
                    continue
                if kind == "missed":
                    yield Missed(int(message["data"]["count"]), "server")
                elif kind == "rejected":
                    log.warning("stream %s rejected a message: %s", self._path, message["data"])
                else:
                    try:
                        event = self._parse(message)
                    except (KeyError, TypeError, ValueError) as err:
                        # A newer server may send shapes this client does not know: skip them.
                        log.warning(
                            "stream %s: cannot read a %s message: %r", self._path, kind, err
                        )
                        continue
                    if event is not None:
                        yield event


class _Reader:
    """Reads JSON messages off one connection, checking ``seq`` (it counts every message)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, silence_s: float) -> None:
        self._ws = ws
        self._silence_s = silence_s
        self._seq = 0
        self.gap = 0

    async def next(self) -> dict[str, Any]:
        """The next message; raises _Dropped on close, silence or garbage."""
        try:
            message = await self._ws.receive(timeout=self._silence_s)
        except TimeoutError:
            raise _Dropped(None, f"silent for {self._silence_s:.0f} s") from None
        if message.type is aiohttp.WSMsgType.CLOSE:
            raise _Dropped(int(message.data), str(message.extra or ""))
        if message.type is not aiohttp.WSMsgType.TEXT:
            raise _Dropped(self._ws.close_code, str(message.extra or message.type.name))
        try:
            body: dict[str, Any] = json.loads(message.data)
            seq = int(body["seq"])
        except (ValueError, KeyError, TypeError):
            raise _Dropped(None, "malformed message") from None
        self.gap = max(0, seq - self._seq - 1)
        self._seq = seq
        return body

    async def expect(self, kind: str) -> dict[str, Any]:
        """Skip heartbeats until a message of type ``kind``."""
        while True:
            message = await self.next()
            if message.get("type") == kind:
                return message
            if message.get("type") not in _CONTROL:
                log.debug("skipping %s before %s", message.get("type"), kind)
