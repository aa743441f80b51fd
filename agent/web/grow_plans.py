"""/api/v1/grow-plans and /api/v1/crops: thin handlers over GrowPlanService."""

from __future__ import annotations

from aiohttp import web

from agent.services.grow_plans.plans import GrowPlanService
from agent.web.keys import GROW_PLANS
from protocol.http.endpoints import Api, principal_of
from protocol.http.grow_plan_routes import progress_api
from protocol.schemas.common import PageQuery
from protocol.schemas.grow_plans import (
    CropList,
    GrowPlan,
    GrowPlanCreate,
    GrowPlanList,
    GrowPlanListQuery,
    GrowPlanUpdate,
)

api = Api()
_TAG = "Grow plans"


@api.route(
    "GET",
    "/api/v1/crops",
    summary="The crop catalogue: default stages per species",
    tag=_TAG,
    query=PageQuery,
    response=CropList,
)
async def list_crops(request: web.Request, query: PageQuery) -> CropList:
    """Catalogue species with their default stages, climate targets and lighting."""
    return request.app[GROW_PLANS].crops(query)


@api.route(
    "GET",
    "/api/v1/grow-plans",
    summary="List grow plans",
    tag=_TAG,
    query=GrowPlanListQuery,
    response=GrowPlanList,
    errors=(404,),
)
async def list_grow_plans(request: web.Request, query: GrowPlanListQuery) -> GrowPlanList:
    """Plans on farms the caller may see, filtered by farm, shelf and status."""
    return await request.app[GROW_PLANS].find(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/grow-plans",
    summary="Create a grow plan",
    tag=_TAG,
    body=GrowPlanCreate,
    response=GrowPlan,
    status=201,
    errors=(403, 404, 409),
)
async def create_grow_plan(request: web.Request, body: GrowPlanCreate) -> GrowPlan:
    """Plan a crop on shelves of a farm; an active plan occupies its shelves at once."""
    return await request.app[GROW_PLANS].create(principal_of(request), body)


@api.route(
    "PUT",
    "/api/v1/grow-plans/{plan_id}",
    summary="Update a grow plan or change its status",
    tag=_TAG,
    body=GrowPlanUpdate,
    response=GrowPlan,
    errors=(403, 404, 409),
)
async def update_grow_plan(request: web.Request, plan_id: str, body: GrowPlanUpdate) -> GrowPlan:
    """planned -> active -> harvested, planned|active -> cancelled; other changes are 409."""
    return await request.app[GROW_PLANS].update(principal_of(request), plan_id, body)


def _plans(request: web.Request) -> GrowPlanService:
    return request.app[GROW_PLANS]


api.extend(progress_api(_plans))
