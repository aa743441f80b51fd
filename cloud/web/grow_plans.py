"""/api/v1/grow-plans and a plan's progress (protocol/http/grow_plan_routes.py) over the mirror."""

from __future__ import annotations

from aiohttp import web

from cloud.services.grow_plans import GrowPlanService
from cloud.web.keys import GROW_PLANS
from protocol.http.endpoints import Api, principal_of
from protocol.http.grow_plan_routes import progress_api
from protocol.schemas.grow_plans import GrowPlanList, GrowPlanListQuery

api = Api()


@api.route(
    "GET",
    "/api/v1/grow-plans",
    summary="List grow plans",
    tag="Grow plans",
    query=GrowPlanListQuery,
    response=GrowPlanList,
    errors=(404,),
)
async def list_grow_plans(request: web.Request, query: GrowPlanListQuery) -> GrowPlanList:
    """Plans of the farms the caller may see, newest first."""
    return await request.app[GROW_PLANS].list(principal_of(request), query)


def _plans(request: web.Request) -> GrowPlanService:
    return request.app[GROW_PLANS]


api.extend(progress_api(_plans))
