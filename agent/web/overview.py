"""/api/v1/farms/{farm_id}/overview (protocol/http/overview_routes.py) on the agent."""

from __future__ import annotations

from aiohttp import web

from agent.services.overview.service import OverviewService
from agent.web.keys import OVERVIEW
from protocol.http.overview_routes import overview_api

__all__ = ["api"]


def _overview(request: web.Request) -> OverviewService:
    return request.app[OVERVIEW]


api = overview_api(_overview)
