"""/api/v1/farms: thin handlers over FarmService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import FARMS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.farms import (
    Farm,
    FarmCreate,
    FarmDetail,
    FarmList,
    FarmListQuery,
    FarmUpdate,
)

api = Api()
_TAG = "Farms"


@api.route(
    "GET",
    "/api/v1/farms/",
    summary="List farms with metrics",
    tag=_TAG,
    query=FarmListQuery,
    response=FarmList,
    shared_answers=True,
)
async def list_farms(request: web.Request, query: FarmListQuery) -> FarmList:
    """Farms the caller may see, searchable by name."""
    return await request.app[FARMS].list(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/farms/",
    summary="Create a farm",
    tag=_TAG,
    body=FarmCreate,
    response=Farm,
    status=201,
    errors=(403,),
)
async def create_farm(request: web.Request, body: FarmCreate) -> Farm:
    """Create a farm owned by the caller."""
    return await request.app[FARMS].create(principal_of(request), body)


@api.route(
    "GET",
    "/api/v1/farms/{farm_id}",
    summary="Farm detail with rows and devices",
    tag=_TAG,
    response=FarmDetail,
)
async def get_farm(request: web.Request, farm_id: str) -> FarmDetail:
    """One farm with its rows and devices."""
    return await request.app[FARMS].detail(principal_of(request), farm_id)


@api.route(
    "PUT",
    "/api/v1/farms/{farm_id}",
    summary="Update a farm",
    tag=_TAG,
    body=FarmUpdate,
    response=Farm,
    errors=(403,),
)
async def update_farm(request: web.Request, farm_id: str, body: FarmUpdate) -> Farm:
    """Change the given fields."""
    return await request.app[FARMS].update(principal_of(request), farm_id, body)


@api.route(
    "DELETE",
    "/api/v1/farms/{farm_id}",
    summary="Delete a farm and all below it",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def delete_farm(request: web.Request, farm_id: str) -> None:
    """Remove the farm, its rows, racks, shelves and devices."""
    await request.app[FARMS].delete(principal_of(request), farm_id)
