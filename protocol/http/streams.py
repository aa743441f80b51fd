"""/ws/farm-status, /ws/device-events, /ws/sensor-data: thin WebSocket handlers
(docs/design.md section 7), the same on the agent and the cloud; each passes the stream service
that serves its connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import WSMsgType, web

from protocol.errors import BadRequest, ServiceUnavailable
from protocol.live.outbox import Stream
from protocol.live.service import StreamService
from protocol.streams import (
    CLOSE_GOING_AWAY,
    CLOSE_POLICY,
    StreamClosed,
    text_frames,
)

__all__ = ["PATHS", "ServiceOf", "install_streams"]

PATHS = {stream: f"/ws/{stream.value}" for stream in Stream}
_MAX_CLIENT_MESSAGE = 64 * 1024
_CLOSE_TIMEOUT_S = 5.0
_UNSUPPORTED_DATA = 1003  # RFC 6455 section 7.4.1
_MAX_REASON_BYTES = 123  # RFC 6455 section 5.5: control frame payload <= 125, 2 for the code
_HIGH_WATER = 64 * 1024
"""Bytes queued for one client beyond which sending waits (asyncio's default high-water mark)."""
_LOW_WATER = 16 * 1024
_DRAIN_POLL_S = 0.05

ServiceOf = Callable[[web.Application], StreamService | None]
"""The application's stream service, or None while it is not running."""


class _AiohttpSocket:
    """The streams' Socket over an aiohttp WebSocketResponse."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        transport: asyncio.Transport | None,
        send_timeout_s: float,
    ) -> None:
        self._ws = ws
        self._transport = transport
        self._send_timeout_s = send_timeout_s

    async def send_text(self, text: str) -> None:
        await self.send_texts((text,))

    async def send_texts(self, texts: Sequence[str]) -> None:
        # One write (one syscall) for a whole burst instead of one per message and client: the
        # frames are whole and compression is off, so they cannot interleave with aiohttp's own
        # control frames. The transport's buffer is the flow control: past its high-water mark
        # we wait for the client to take data, at most send_timeout_s.
        transport = self._transport
        if self._ws.closed or transport is None or transport.is_closing():
            raise StreamClosed(CLOSE_GOING_AWAY, "client gone")
        transport.write(text_frames(texts))
        if transport.get_write_buffer_size() > _HIGH_WATER:
            await self._drained(transport)

    async def _drained(self, transport: asyncio.Transport) -> None:
        # The client is too slow only once it has taken nothing for send_timeout_s.
        loop = asyncio.get_running_loop()
        queued = transport.get_write_buffer_size()
        deadline = loop.time() + self._send_timeout_s
        while queued > _LOW_WATER:
            if transport.is_closing():
                raise StreamClosed(CLOSE_GOING_AWAY, "client gone")
            if loop.time() >= deadline:
                raise StreamClosed(CLOSE_POLICY, "client too slow")
            await asyncio.sleep(_DRAIN_POLL_S)
            now_queued = transport.get_write_buffer_size()
            if now_queued < queued:
                deadline = loop.time() + self._send_timeout_s
            queued = now_queued

    async def receive_text(self) -> str | None:
        message = await self._ws.receive()
        if message.type is WSMsgType.TEXT:
            text: str = message.data
            return text
        if message.type is WSMsgType.BINARY:
            raise StreamClosed(_UNSUPPORTED_DATA, "text messages only")
        return None  # close, closing, closed or a protocol error: the client is done

    async def close(self, code: int, reason: str) -> None:
        payload = reason.encode()[:_MAX_REASON_BYTES]
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(_CLOSE_TIMEOUT_S):
                await self._ws.close(code=code, message=payload)


def _handler(
    stream: Stream, service_of: ServiceOf, send_timeout_s: float
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        service = service_of(request.app)
        if service is None:
            raise ServiceUnavailable("The live streams are not running")
        # autoclose off: the close reply goes out only once the connection is released, so a
        # client that closed one connection can open the next one within its limit at once.
        # compress off: permessage-deflate cost ~40 us per message per client on this machine
        # (CPU on every client's copy, since each has its own deflate context) to save ~250
        # bytes of a LAN or loopback frame; it does not pay on a Pi (docs/adr/0029-streams.md).
        ws = web.WebSocketResponse(
            timeout=_CLOSE_TIMEOUT_S,
            max_msg_size=_MAX_CLIENT_MESSAGE,
            autoclose=False,
            compress=False,
        )
        if not ws.can_prepare(request).ok:
            raise BadRequest(f"{request.path} speaks WebSocket only: send an Upgrade request")
        await ws.prepare(request)
        transport = request.transport
        socket = _AiohttpSocket(ws, transport, send_timeout_s)
        await service.serve(stream, socket, request.query, request.headers)
        return ws

    handle.__name__ = f"stream_{stream.name.lower()}"
    return handle


def install_streams(app: web.Application, service_of: ServiceOf, send_timeout_s: float) -> None:
    """Add the three stream endpoints, and close their connections when the service stops."""

    async def close_streams(app: web.Application) -> None:
        # on_shutdown runs before the server waits for open handlers, so streams end at once.
        service = service_of(app)
        if service is not None:
            await service.close()

    for stream, path in PATHS.items():
        app.router.add_get(path, _handler(stream, service_of, send_timeout_s), allow_head=False)
    app.on_shutdown.append(close_streams)
