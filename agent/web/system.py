"""/health, /healthz, /supabase-items, and the API's own documentation."""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from agent.web.keys import HEALTH, OPENAPI
from protocol.http.endpoints import Api
from protocol.schemas.common import Health
from protocol.schemas.system import Connectivity, DetailedHealth

api = Api()
_TAG = "System"


@api.route("GET", "/health", summary="Liveness", tag=_TAG, response=Health, auth=False)
async def health(request: web.Request) -> Health:
    """Cheap liveness for load balancers and systemd."""
    return request.app[HEALTH].health()


@api.route(
    "GET",
    "/healthz",
    summary="Detailed health with real checks",
    tag=_TAG,
    response=DetailedHealth,
    auth=False,
)
async def healthz(request: web.Request) -> DetailedHealth:
    """Database and link checks with process figures."""
    return await request.app[HEALTH].detailed()


@api.route(
    "GET",
    "/supabase-items",
    summary="Backend connectivity test",
    tag=_TAG,
    response=Connectivity,
    auth=False,
)
async def backend_items(request: web.Request) -> Connectivity:
    """The backend link's status, items, round-trip time and last sync."""
    return await request.app[HEALTH].connectivity()


async def openapi_json(request: web.Request) -> web.Response:
    """The OpenAPI 3.1 document."""
    return web.json_response(request.app[OPENAPI])


async def docs_page(request: web.Request) -> web.Response:
    """A self-contained docs page (the farm LAN may have no internet for a CDN)."""
    page = resources.files("agent.web").joinpath("docs.html").read_text(encoding="utf-8")
    return web.Response(text=page, content_type="text/html")


def install_docs(app: web.Application) -> None:
    """Serve /api/v1/openapi.json and /api/v1/docs."""
    app.router.add_get("/api/v1/openapi.json", openapi_json)
    app.router.add_get("/api/v1/docs", docs_page)
