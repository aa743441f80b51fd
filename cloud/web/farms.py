"""/api/v1/farms, /rows, /racks, /shelves over the mirror: thin handlers over FarmService."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import FARMS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.farms import (
    FarmDetail,
    FarmList,
    FarmListQuery,
    RackList,
    RackListQuery,
    RowList,
    RowListQuery,
    ShelfList,
    ShelfListQuery,
)

api = Api()


@api.route(
    "GET",
    "/api/v1/farms/",
    summary="List farms with metrics",
    tag="Farms",
    query=FarmListQuery,
    response=FarmList,
)
async def list_farms(request: web.Request, query: FarmListQuery) -> FarmList:
    """Farms the caller may see, searchable by name."""
    return await request.app[FARMS].list(principal_of(request), query)


@api.route(
    "GET",
    "/api/v1/farms/{farm_id}",
    summary="Farm detail with rows and devices",
    tag="Farms",
    response=FarmDetail,
)
async def get_farm(request: web.Request, farm_id: str) -> FarmDetail:
    """One farm with its rows and devices."""
    return await request.app[FARMS].detail(principal_of(request), farm_id)


@api.route(
    "GET",
    "/api/v1/rows/",
    summary="List a farm's rows",
    tag="Rows, racks, shelves",
    query=RowListQuery,
    response=RowList,
    errors=(404,),
)
async def list_rows(request: web.Request, query: RowListQuery) -> RowList:
    """Rows of a farm with the racks, shelves and capacity below them."""
    return await request.app[FARMS].rows(principal_of(request), query)


@api.route(
    "GET",
    "/api/v1/racks/",
    summary="List a row's racks",
    tag="Rows, racks, shelves",
    query=RackListQuery,
    response=RackList,
    errors=(404,),
)
async def list_racks(request: web.Request, query: RackListQuery) -> RackList:
    """Racks of a row."""
    return await request.app[FARMS].racks(principal_of(request), query)


@api.route(
    "GET",
    "/api/v1/shelves/",
    summary="List a rack's shelves",
    tag="Rows, racks, shelves",
    query=ShelfListQuery,
    response=ShelfList,
    errors=(404,),
)
async def list_shelves(request: web.Request, query: ShelfListQuery) -> ShelfList:
    """Shelves of a rack."""
    return await request.app[FARMS].shelves(principal_of(request), query)
