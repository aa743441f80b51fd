"""GET /api/v1/climate-control and /climate-control/history, which agent and cloud both serve,
declared once. The agent answers from its settings, its running loops and its readings; the cloud
from the mirror of them under the caller's row-level security. Changing the settings is the
agent's alone (it runs the loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal
from protocol.schemas.climate import (
    ClimateControlList,
    ClimateControlQuery,
    ClimateHistory,
    ClimateHistoryQuery,
)

__all__ = ["TAG", "ClimateReads", "climate_api"]

TAG = "Climate"


class ClimateReads(Protocol):
    """One side's climate service."""

    async def list(self, principal: Principal, query: ClimateControlQuery) -> ClimateControlList:
        """Each visible farm's settings and live state, then each row with its own settings."""
        ...

    async def history(self, principal: Principal, query: ClimateHistoryQuery) -> ClimateHistory:
        """Settings changes and loop actions of one farm, newest first."""
        ...


def climate_api(climate_of: Callable[[web.Request], ClimateReads]) -> Api:
    """The climate reads, answered by the service ``climate_of(request)`` returns."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/climate-control",
        summary="Climate settings and live state",
        tag=TAG,
        query=ClimateControlQuery,
        response=ClimateControlList,
        errors=(404,),
    )
    async def list_climate(request: web.Request, query: ClimateControlQuery) -> ClimateControlList:
        """Each visible farm's settings and live state, and each row with its own settings."""
        return await climate_of(request).list(principal_of(request), query)

    @api.route(
        "GET",
        "/api/v1/climate-control/history",
        summary="Climate settings changes and control actions",
        tag=TAG,
        query=ClimateHistoryQuery,
        response=ClimateHistory,
        errors=(404,),
    )
    async def climate_history(request: web.Request, query: ClimateHistoryQuery) -> ClimateHistory:
        """Who changed what and when, and every action with the readings that caused it."""
        return await climate_of(request).history(principal_of(request), query)

    return api
