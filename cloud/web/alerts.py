"""/api/v1/alerts over the mirror: a thin handler."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import ALERTS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.alerts import AlertList, AlertListQuery

api = Api()


@api.route(
    "GET",
    "/api/v1/alerts",
    summary="Alerts raised by the agents' rules (state=active for what is raised now)",
    tag="Alerts",
    query=AlertListQuery,
    response=AlertList,
    errors=(404,),
)
async def list_alerts(request: web.Request, query: AlertListQuery) -> AlertList:
    """Alerts of the farms the caller may see, newest raised first."""
    return await request.app[ALERTS].list(principal_of(request), query)
