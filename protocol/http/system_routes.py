"""/health, /healthz and /supabase-items, which agent and cloud both serve, declared once.

Each side hands over how a request finds its health service; the figures differ (the agent
checks its SQLite file and its cloud link, the cloud its two database paths), the endpoints,
schemas and status codes do not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api
from protocol.schemas.common import Health
from protocol.schemas.system import Connectivity, DetailedHealth

__all__ = ["HealthReport", "system_api"]

_TAG = "System"


class HealthReport(Protocol):
    """One side's health service."""

    def health(self) -> Health:
        """Liveness: no I/O."""
        ...

    async def detailed(self) -> DetailedHealth:
        """Real checks with process figures."""
        ...

    async def connectivity(self) -> Connectivity:
        """The backend's status, items, round-trip time and last sync."""
        ...


def system_api(health_of: Callable[[web.Request], HealthReport]) -> Api:
    """The system endpoints, answered by the health service ``health_of(request)`` returns."""
    api = Api()

    @api.route("GET", "/health", summary="Liveness", tag=_TAG, response=Health, auth=False)
    async def health(request: web.Request) -> Health:
        """Cheap liveness for load balancers and service managers."""
        return health_of(request).health()

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
        return await health_of(request).detailed()

    @api.route(
        "GET",
        "/supabase-items",
        summary="Backend connectivity test",
        tag=_TAG,
        response=Connectivity,
        auth=False,
    )
    async def backend_items(request: web.Request) -> Connectivity:
        """The backend's status, items, round-trip time and last sync."""
        return await health_of(request).connectivity()

    return api
