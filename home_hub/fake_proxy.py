"""A fake access proxy (Cloudflare Access style) in front of a hub.

Requests carrying the right ``CF-Access-Client-Id`` and ``CF-Access-Client-Secret`` are passed to
the hub unchanged (REST only). Without them the proxy answers as Cloudflare Access does for a
browser: a 302 to its login page; with wrong ones, an HTML 403. ``block`` makes it answer every
request with Cloudflare's HTML "error code: 1010" page (a blocked client signature).
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiohttp import web

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

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

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
