"""/api/v1/rows, /racks, /shelves: thin handlers over HierarchyService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import HIERARCHY
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.farms import (
    Rack,
    RackCreate,
    RackList,
    RackListQuery,
    RackUpdate,
    Row,
    RowCreate,
    RowList,
    RowListQuery,
    RowUpdate,
    Shelf,
    ShelfCreate,
    ShelfList,
    ShelfListQuery,
    ShelfUpdate,
)

api = Api()
_TAG = "Rows, racks, shelves"


@api.route(
    "GET",
    "/api/v1/rows/",
    summary="A farm's rows with rack, shelf and capacity counts",
    tag=_TAG,
    query=RowListQuery,
    response=RowList,
    errors=(404,),
)
async def list_rows(request: web.Request, query: RowListQuery) -> RowList:
    """Paged rows of the farm given by ``farm_id``."""
    return await request.app[HIERARCHY].list_rows(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/rows/",
    summary="Create a row",
    tag=_TAG,
    body=RowCreate,
    response=Row,
    status=201,
    errors=(403, 404, 409),
)
async def create_row(request: web.Request, body: RowCreate) -> Row:
    """Add a row under its farm."""
    return await request.app[HIERARCHY].create_row(principal_of(request), body)


@api.route(
    "PUT",
    "/api/v1/rows/{row_id}",
    summary="Update a row",
    tag=_TAG,
    body=RowUpdate,
    response=Row,
    errors=(403, 409),
)
async def update_row(request: web.Request, row_id: str, body: RowUpdate) -> Row:
    """Replace the given fields; the parent cannot change."""
    return await request.app[HIERARCHY].update_row(principal_of(request), row_id, body)


@api.route(
    "DELETE",
    "/api/v1/rows/{row_id}",
    summary="Delete a row with its racks and shelves",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def delete_row(request: web.Request, row_id: str) -> None:
    """Delete a row with its racks and shelves."""
    await request.app[HIERARCHY].delete_row(principal_of(request), row_id)


@api.route(
    "GET",
    "/api/v1/racks/",
    summary="A row's racks",
    tag=_TAG,
    query=RackListQuery,
    response=RackList,
    errors=(404,),
)
async def list_racks(request: web.Request, query: RackListQuery) -> RackList:
    """Paged racks of the row given by ``row_id``."""
    return await request.app[HIERARCHY].list_racks(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/racks/",
    summary="Create a rack",
    tag=_TAG,
    body=RackCreate,
    response=Rack,
    status=201,
    errors=(403, 404, 409),
)
async def create_rack(request: web.Request, body: RackCreate) -> Rack:
    """Add a rack under its row."""
    return await request.app[HIERARCHY].create_rack(principal_of(request), body)


@api.route(
    "PUT",
    "/api/v1/racks/{rack_id}",
    summary="Update a rack",
    tag=_TAG,
    body=RackUpdate,
    response=Rack,
    errors=(403, 409),
)
async def update_rack(request: web.Request, rack_id: str, body: RackUpdate) -> Rack:
    """Replace the given fields; the parent cannot change."""
    return await request.app[HIERARCHY].update_rack(principal_of(request), rack_id, body)


@api.route(
    "DELETE",
    "/api/v1/racks/{rack_id}",
    summary="Delete a rack with its shelves",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def delete_rack(request: web.Request, rack_id: str) -> None:
    """Delete a rack with its shelves."""
    await request.app[HIERARCHY].delete_rack(principal_of(request), rack_id)


@api.route(
    "GET",
    "/api/v1/shelves/",
    summary="A rack's shelves",
    tag=_TAG,
    query=ShelfListQuery,
    response=ShelfList,
    errors=(404,),
)
async def list_shelves(request: web.Request, query: ShelfListQuery) -> ShelfList:
    """Paged shelves of the rack given by ``rack_id``."""
    return await request.app[HIERARCHY].list_shelves(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/shelves/",
    summary="Create a shelf",
    tag=_TAG,
    body=ShelfCreate,
    response=Shelf,
    status=201,
    errors=(403, 404, 409),
)
async def create_shelf(request: web.Request, body: ShelfCreate) -> Shelf:
    """Add a shelf under its rack."""
    return await request.app[HIERARCHY].create_shelf(principal_of(request), body)


@api.route(
    "PUT",
    "/api/v1/shelves/{shelf_id}",
    summary="Update a shelf",
    tag=_TAG,
    body=ShelfUpdate,
    response=Shelf,
    errors=(403, 409),
)
async def update_shelf(request: web.Request, shelf_id: str, body: ShelfUpdate) -> Shelf:
    """Replace the given fields; the parent cannot change."""
    return await request.app[HIERARCHY].update_shelf(principal_of(request), shelf_id, body)


@api.route(
    "DELETE",
    "/api/v1/shelves/{shelf_id}",
    summary="Delete a shelf and its plant data",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def delete_shelf(request: web.Request, shelf_id: str) -> None:
    """Delete a shelf and its plant data."""
    await request.app[HIERARCHY].delete_shelf(principal_of(request), shelf_id)
