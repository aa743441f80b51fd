"""The OpenAPI document and a self-contained page rendering it, at /api/v1/openapi.json and
/api/v1/docs (no CDN: a farm LAN is often offline)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from aiohttp import web

__all__ = ["install_docs"]


def install_docs(app: web.Application, document: dict[str, Any]) -> None:
    """Serve ``document`` and the docs page on ``app``."""
    body = json.dumps(document).encode()
    page = resources.files("protocol.http").joinpath("docs.html").read_text(encoding="utf-8")

    async def openapi_json(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def docs_page(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app.router.add_get("/api/v1/openapi.json", openapi_json)
    app.router.add_get("/api/v1/docs", docs_page)
