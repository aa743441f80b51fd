"""/api/v1/climate-control and its history (protocol/http/climate_routes.py) over the mirror."""

from __future__ import annotations

from aiohttp import web

from cloud.services.climate import ClimateService
from cloud.web.keys import CLIMATE
from protocol.http.climate_routes import climate_api

__all__ = ["api"]


def _climate(request: web.Request) -> ClimateService:
    return request.app[CLIMATE]


api = climate_api(_climate)
