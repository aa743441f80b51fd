"""/health, /healthz and /supabase-items (protocol/http/system_routes.py) served by the agent's
health service; the docs are served by protocol.http.docs."""

from __future__ import annotations

from aiohttp import web

from agent.services.health import HealthService
from agent.web.keys import HEALTH
from protocol.http.system_routes import system_api

__all__ = ["api"]


def _health(request: web.Request) -> HealthService:
    return request.app[HEALTH]


api = system_api(_health)
