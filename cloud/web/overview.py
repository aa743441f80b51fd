"""/api/v1/farms/{farm_id}/overview (protocol/http/overview_routes.py) over the mirror."""

from __future__ import annotations

from aiohttp import web

from cloud.services.overview import OverviewService
from cloud.web.keys import OVERVIEW
from protocol.http.overview_routes import overview_api

__all__ = ["api"]


def _overview(request: web.Request) -> OverviewService:
    return request.app[OVERVIEW]


api = overview_api(_overview)
