"""/api/v1/climate-control: the reads shared with the cloud (protocol/http/climate_routes.py), then
the agent's own settings update; thin handlers over ClimateService."""

from __future__ import annotations

from aiohttp import web

from agent.services.climate.service import ClimateService
from agent.web.keys import CLIMATE
from protocol.http.climate_routes import TAG, climate_api
from protocol.http.endpoints import principal_of
from protocol.schemas.climate import (
    ClimateControl,
    ClimateUpdate,
)


def _climate(request: web.Request) -> ClimateService:
    return request.app[CLIMATE]


api = climate_api(_climate)


@api.route(
    "POST",
    "/api/v1/climate-control/update",
    summary="Set the climate targets of a farm or row",
    tag=TAG,
    body=ClimateUpdate,
    response=ClimateControl,
    errors=(403, 404),
)
async def update_climate(request: web.Request, body: ClimateUpdate) -> ClimateControl:
    """Replace the settings of a farm or row."""
    return await request.app[CLIMATE].update(principal_of(request), body)
