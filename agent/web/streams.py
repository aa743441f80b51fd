"""/ws/farm-status, /ws/device-events, /ws/sensor-data: thin WebSocket handlers (DESIGN.md s. 7)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import WSMsgType, web

from agent.services.stream_outbox import Stream
from agent.services.stream_protocol import CLOSE_GOING_AWAY, CLOSE_POLICY, StreamClosed
from agent.web.keys import SETTINGS, STREAMS
from protocol.errors import BadRequest

__all__ = ["PATHS", "install"]

PATHS = {stream: f"/ws/{stream.value}" for stream in Stream}
_MAX_CLIENT_MESSAGE = 64 * 1024
_CLOSE_TIMEOUT_S = 5.0
_UNSUPPORTED_DATA = 1003  # RFC 6455 section 7.4.1
_MAX_REASON_BYTES = 123  # RFC 6455 section 5.5: control frame payload <= 125, 2 for the code


class _AiohttpSocket:
    """The streams' Socket over an aiohttp WebSocketResponse."""

    def __init__(self, ws: web.WebSocketResponse, send_timeout_s: float) -> None:
        self._ws = ws
        self._send_timeout_s = send_timeout_s

    async def send_text(self, text: str) -> None:
        try:
            async with asyncio.timeout(self._send_timeout_s):
                await self._ws.send_str(text)
        except TimeoutError:
            raise StreamClosed(CLOSE_POLICY, "client too slow") from None
        except ConnectionError:
            raise StreamClosed(CLOSE_GOING_AWAY, "client gone") from None

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


def _handler(stream: Stream) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        # autoclose off: the close reply goes out only once the connection is released, so a
        # client that closed one connection can open the next one within its limit at once.
        ws = web.WebSocketResponse(
            timeout=_CLOSE_TIMEOUT_S, max_msg_size=_MAX_CLIENT_MESSAGE, autoclose=False
        )
        if not ws.can_prepare(request).ok:
            raise BadRequest(f"{request.path} speaks WebSocket only: send an Upgrade request")
        await ws.prepare(request)
        socket = _AiohttpSocket(ws, request.app[SETTINGS].ws_send_timeout_s)
        await request.app[STREAMS].serve(stream, socket, request.query, request.headers)
        return ws

    handle.__name__ = f"stream_{stream.name.lower()}"
    return handle


async def _close_streams(app: web.Application) -> None:
    # on_shutdown runs before the server waits for open handlers, so streams end at once.
    if STREAMS in app:
        await app[STREAMS].close()


def install(app: web.Application) -> None:
    """Add the three stream endpoints, and close their connections when the agent stops."""
    for stream, path in PATHS.items():
        app.router.add_get(path, _handler(stream), allow_head=False)
    app.on_shutdown.append(_close_streams)
