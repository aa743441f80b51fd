"""The OpenAPI document and a self-contained page rendering it, at /api/v1/openapi.json and
/api/v1/docs (no CDN: a farm LAN is often offline), the page with the web app's security
headers (it holds a sign-in form: no framing, no script but its own)."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from aiohttp import web

from protocol.http.page_security import content_security_policy, inline_hashes, security_headers

__all__ = ["install_docs"]


def install_docs(app: web.Application, build: Callable[[], dict[str, Any]]) -> None:
    """Serve the document ``build`` makes, and the docs page, on ``app``.

    The document is built on its first request and kept as bytes: generating the JSON schemas
    of every model holds a few MB that a farm agent serving no docs reader should not carry.
    """
    built: list[bytes] = []
    page = resources.files("protocol.http").joinpath("docs.html").read_text(encoding="utf-8")
    # The web app's headers; the page's own inline script and style are allowed by their hash.
    headers = security_headers(
        content_security_policy(inline_hashes(page, "script"), inline_hashes(page, "style"))
    )

    async def openapi_json(request: web.Request) -> web.Response:
        if not built:
            built.append(json.dumps(build()).encode())
        return web.Response(body=built[0], content_type="application/json")

    async def docs_page(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html", headers=headers)

    app.router.add_get("/api/v1/openapi.json", openapi_json)
    app.router.add_get("/api/v1/docs", docs_page)
