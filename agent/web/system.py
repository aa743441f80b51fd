"""/health, /healthz and /supabase-items (the docs are served by protocol.http.docs)."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import HEALTH
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
