"""A fake access proxy (Cloudflare Access style) in front of a hub.

Requests carrying the right ``CF-Access-Client-Id`` and ``CF-Access-Client-Secret`` are passed to
the hub unchanged, WebSocket upgrades included (Cloudflare Access proxies WebSockets once the
upgrade request passed its check). Without them the proxy answers as Cloudflare Access does for a
browser: a 302 to its login page; with wrong ones, an HTML 403. ``block`` makes it answer every
request with Cloudflare's HTML "error code: 1010" page (a blocked client signature).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import aiohttp
from aiohttp import WSCloseCode, WSMsgType, web

__all__ = ["FakeAccessProxy"]

LOGIN_URL = "https://farm.cloudflareaccess.com/cdn-cgi/access/login/hub.farm.example"
_FORBIDDEN = (
    "<!DOCTYPE html><html><head><title>Forbidden</title></head><body>Forbidden</body></html>"
)
_BLOCKED = "<!DOCTYPE html><html><body><h1>Access denied</h1><p>error code: 1010</p></body></html>"
_HOP_HEADERS = ("Authorization", "Content-Type")


@dataclass
class FakeAccessProxy:
    """Checks the service token, then forwards to ``upstream``."""

    upstream: str
    client_id: str
    client_secret: str
    block: bool = False
    _sockets: set[web.WebSocketResponse] = field(default_factory=set)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_shutdown.append(self._shutdown)
        return app

    async def _shutdown(self, _app: web.Application) -> None:
        # Open WebSockets would otherwise hold the server's shutdown for its whole grace period.
        for ws in tuple(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.block:
            return web.Response(status=403, text=_BLOCKED, content_type="text/html")
        given_id = request.headers.get("CF-Access-Client-Id")
        given_secret = request.headers.get("CF-Access-Client-Secret")
        if given_id is None or given_secret is None:
            raise web.HTTPFound(f"{LOGIN_URL}?redirect_url={request.path}")
        if (given_id, given_secret) != (self.client_id, self.client_secret):
            return web.Response(status=403, text=_FORBIDDEN, content_type="text/html")
        headers = {name: request.headers[name] for name in _HOP_HEADERS if name in request.headers}
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._websocket(request, headers)
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                self.upstream.rstrip("/") + request.path_qs,
                data=await request.read(),
                headers=headers,
                allow_redirects=False,
            ) as upstream,
        ):
            body = await upstream.read()
            return web.Response(
                status=upstream.status,
                body=body,
                headers={"Content-Type": upstream.headers.get("Content-Type", "text/plain")},
            )

    async def _websocket(
        self, request: web.Request, headers: dict[str, str]
    ) -> web.WebSocketResponse:
        """Relay a WebSocket both ways until either side closes."""
        upstream_url = self.upstream.rstrip("/") + request.path_qs
        downstream = web.WebSocketResponse()
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(upstream_url, headers=headers) as upstream,
        ):
            await downstream.prepare(request)
            self._sockets.add(downstream)

            async def pipe(
                source: aiohttp.ClientWebSocketResponse | web.WebSocketResponse,
                sink: aiohttp.ClientWebSocketResponse | web.WebSocketResponse,
            ) -> None:
                async for message in source:
                    if message.type == WSMsgType.TEXT:
                        await sink.send_str(message.data)
                    elif message.type == WSMsgType.BINARY:
                        await sink.send_bytes(message.data)
                await sink.close()

            tasks = [
                asyncio.create_task(pipe(upstream, downstream)),
                asyncio.create_task(pipe(downstream, upstream)),
            ]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                        await task
                self._sockets.discard(downstream)
        return downstream
