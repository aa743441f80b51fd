"""Farms and their structure: rows, racks and shelves (/api/v1/farms, /rows, /racks, /shelves)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from farm_client.resources.base import Id, Resource, body_of
from farm_client.transport import Params
from protocol.schemas.farms import (
    Farm,
    FarmCreate,
    FarmDetail,
    FarmList,
    FarmListItem,
    FarmUpdate,
    Rack,
    RackCreate,
    RackList,
    RackUpdate,
    Row,
    RowCreate,
    RowList,
    RowListItem,
    RowUpdate,
    Shelf,
    ShelfCreate,
    ShelfList,
    ShelfUpdate,
)

__all__ = ["Farms", "Racks", "Rows", "Shelves"]


class Farms(Resource):
    """/api/v1/farms: the farms the caller may see."""

    async def list(
        self, *, limit: int = 50, offset: int = 0, search: str | None = None
    ) -> FarmList:
        """One page of farms."""
        params = {"limit": limit, "offset": offset, "search": search}
        return await self._t.get("/api/v1/farms/", FarmList, params)

    def iterate(
        self, *, search: str | None = None, page_size: int = 100
    ) -> AsyncIterator[FarmListItem]:
        """Every farm, fetching pages as needed."""
        return self._t.pages("/api/v1/farms/", FarmList, "farms", {"search": search}, page_size)

    async def get(self, farm_id: Id) -> FarmDetail:
        """One farm with its rows and devices."""
        return await self._t.get(f"/api/v1/farms/{farm_id}", FarmDetail)

    async def create(self, body: FarmCreate | None = None, **fields: Any) -> Farm:
        """Create a farm (``name``, ``description``, ``location``, ``status``)."""
        return await self._t.send("POST", "/api/v1/farms/", Farm, body_of(FarmCreate, body, fields))

    async def update(self, farm_id: Id, body: FarmUpdate | None = None, **fields: Any) -> Farm:
        """Change the fields given."""
        path = f"/api/v1/farms/{farm_id}"
        return await self._t.send("PUT", path, Farm, body_of(FarmUpdate, body, fields))

    async def delete(self, farm_id: Id) -> None:
        """Delete a farm."""
        await self._t.delete(f"/api/v1/farms/{farm_id}")


class Rows(Resource):
    """/api/v1/rows: rows of a farm."""

    async def list(self, farm_id: Id, *, limit: int = 50, offset: int = 0) -> RowList:
        """One page of a farm's rows."""
        params: Params = {"farm_id": str(farm_id), "limit": limit, "offset": offset}
        return await self._t.get("/api/v1/rows/", RowList, params)

    def iterate(self, farm_id: Id, *, page_size: int = 100) -> AsyncIterator[RowListItem]:
        """Every row of a farm."""
        return self._t.pages("/api/v1/rows/", RowList, "rows", {"farm_id": str(farm_id)}, page_size)

    async def create(self, body: RowCreate | None = None, **fields: Any) -> Row:
        """Create a row (``farm_id``, ``name``, ``position``)."""
        return await self._t.send("POST", "/api/v1/rows/", Row, body_of(RowCreate, body, fields))

    async def update(self, row_id: Id, body: RowUpdate | None = None, **fields: Any) -> Row:
        """Change the fields given."""
        path = f"/api/v1/rows/{row_id}"
        return await self._t.send("PUT", path, Row, body_of(RowUpdate, body, fields))

    async def delete(self, row_id: Id) -> None:
        """Delete a row."""
        await self._t.delete(f"/api/v1/rows/{row_id}")


class Racks(Resource):
    """/api/v1/racks: racks of a row."""

    async def list(self, row_id: Id, *, limit: int = 50, offset: int = 0) -> RackList:
        """One page of a row's racks."""
        params: Params = {"row_id": str(row_id), "limit": limit, "offset": offset}
        return await self._t.get("/api/v1/racks/", RackList, params)

    def iterate(self, row_id: Id, *, page_size: int = 100) -> AsyncIterator[Rack]:
        """Every rack of a row."""
        return self._t.pages(
            "/api/v1/racks/", RackList, "racks", {"row_id": str(row_id)}, page_size
        )

    async def create(self, body: RackCreate | None = None, **fields: Any) -> Rack:
        """Create a rack (``row_id``, ``name``, ``position``, sizes)."""
        return await self._t.send("POST", "/api/v1/racks/", Rack, body_of(RackCreate, body, fields))

    async def update(self, rack_id: Id, body: RackUpdate | None = None, **fields: Any) -> Rack:
        """Change the fields given."""
        path = f"/api/v1/racks/{rack_id}"
        return await self._t.send("PUT", path, Rack, body_of(RackUpdate, body, fields))

    async def delete(self, rack_id: Id) -> None:
        """Delete a rack."""
        await self._t.delete(f"/api/v1/racks/{rack_id}")


class Shelves(Resource):
    """/api/v1/shelves: shelves of a rack."""

    async def list(self, rack_id: Id, *, limit: int = 50, offset: int = 0) -> ShelfList:
        """One page of a rack's shelves."""
        params: Params = {"rack_id": str(rack_id), "limit": limit, "offset": offset}
        return await self._t.get("/api/v1/shelves/", ShelfList, params)

    def iterate(self, rack_id: Id, *, page_size: int = 100) -> AsyncIterator[Shelf]:
        """Every shelf of a rack."""
        params = {"rack_id": str(rack_id)}
        return self._t.pages("/api/v1/shelves/", ShelfList, "shelves", params, page_size)

    async def create(self, body: ShelfCreate | None = None, **fields: Any) -> Shelf:
        """Create a shelf (``rack_id``, ``name``, ``level``, ``plant_capacity``)."""
        path = "/api/v1/shelves/"
        return await self._t.send("POST", path, Shelf, body_of(ShelfCreate, body, fields))

    async def update(self, shelf_id: Id, body: ShelfUpdate | None = None, **fields: Any) -> Shelf:
        """Change the fields given."""
        path = f"/api/v1/shelves/{shelf_id}"
        return await self._t.send("PUT", path, Shelf, body_of(ShelfUpdate, body, fields))

    async def delete(self, shelf_id: Id) -> None:
        """Delete a shelf."""
        await self._t.delete(f"/api/v1/shelves/{shelf_id}")
