"""GET /api/v1/farms/{farm_id}/overview, which agent and cloud both serve, declared once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal
from protocol.schemas.overview import FarmOverview, OverviewQuery

__all__ = ["OverviewReads", "overview_api"]


class OverviewReads(Protocol):
    """One side's overview service."""

    async def overview(
        self, principal: Principal, farm_id: str, query: OverviewQuery
    ) -> FarmOverview:
        """The farm's overview; a farm the caller may not see is a 404."""
        ...


def overview_api(overview_of: Callable[[web.Request], OverviewReads]) -> Api:
    """The overview endpoint, answered by the service ``overview_of(request)`` returns."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/farms/{farm_id}/overview",
        summary="A farm at a glance: layout, shelf aggregates, offline devices, alerts",
        tag="Farms",
        query=OverviewQuery,
        response=FarmOverview,
        errors=(404,),
    )
    async def farm_overview(
        request: web.Request, farm_id: str, query: OverviewQuery
    ) -> FarmOverview:
        """Per row, rack and shelf: shelves out of band, offline devices and alerts; per shelf
        each metric over its sensors' latest readings (mean, min, max, which are out of band);
        offline devices and active alerts. One request for what the overview screen shows."""
        return await overview_of(request).overview(principal_of(request), farm_id, query)

    return api
