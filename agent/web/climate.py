"""/api/v1/climate-control: thin handlers over ClimateService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import CLIMATE
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.climate import (
    ClimateControl,
    ClimateControlList,
    ClimateControlQuery,
    ClimateHistory,
    ClimateHistoryQuery,
    ClimateUpdate,
)

api = Api()
_TAG = "Climate"


@api.route(
    "GET",
    "/api/v1/climate-control",
    summary="Climate settings and live state",
    tag=_TAG,
    query=ClimateControlQuery,
    response=ClimateControlList,
    errors=(404,),
)
async def list_climate(request: web.Request, query: ClimateControlQuery) -> ClimateControlList:
    """Each visible farm's settings and live state, and each row with its own settings."""
    return await request.app[CLIMATE].list(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/climate-control/update",
    summary="Set the climate targets of a farm or row",
    tag=_TAG,
    body=ClimateUpdate,
    response=ClimateControl,
    errors=(403, 404),
)
async def update_climate(request: web.Request, body: ClimateUpdate) -> ClimateControl:
    """Replace the settings of a farm or row."""
    return await request.app[CLIMATE].update(principal_of(request), body)


@api.route(
    "GET",
    "/api/v1/climate-control/history",
    summary="Climate settings changes and control actions",
    tag=_TAG,
    query=ClimateHistoryQuery,
    response=ClimateHistory,
    errors=(404,),
)
async def climate_history(request: web.Request, query: ClimateHistoryQuery) -> ClimateHistory:
    """Who changed what and when, and every action with the readings that caused it."""
    return await request.app[CLIMATE].history(principal_of(request), query)
