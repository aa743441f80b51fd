"""Row, rack and shelf use cases: paged lists under a parent, create, update, delete.

Reads need the farm to be visible, writes need ``Action.MANAGE`` on it (protocol.access). An item
or parent that does not exist and one on a farm the caller may not see are the same 404, named
after what the caller asked for, so neither existence is disclosed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent.store.hierarchy import RACKS, ROWS, SHELVES, HierarchyStore, Level
from protocol.access import Action, authorize
from protocol.errors import NotFound
from protocol.identity import PermissionType, Principal
from protocol.schemas.common import PageQuery
from protocol.schemas.farms import (
    Rack,
    RackCreate,
    RackList,
    RackListQuery,
    RackUpdate,
    Row,
    RowCreate,
    RowList,
    RowListItem,
    RowListQuery,
    RowUpdate,
    Shelf,
    ShelfCreate,
    ShelfList,
    ShelfListQuery,
    ShelfUpdate,
)

__all__ = ["HierarchyService"]


class HierarchyService:
    """Rows, racks and shelves as the caller may see and change them."""

    def __init__(self, store: HierarchyStore) -> None:
        self._store = store

    # Rows ---------------------------------------------------------------------------------

    async def list_rows(self, principal: Principal, query: RowListQuery) -> RowList:
        """A farm's rows by position, with rack, shelf and capacity counts."""
        rows, total = await self._list(principal, ROWS, str(query.farm_id), query)
        items = [RowListItem(**dict(row)) for row in rows]
        return RowList(rows=items, total=total, limit=query.limit, offset=query.offset)

    async def create_row(self, principal: Principal, body: RowCreate) -> Row:
        """Add a row to a farm."""
        return Row(**await self._create(principal, ROWS, str(body.farm_id), body.model_dump()))

    async def update_row(self, principal: Principal, row_id: str, body: RowUpdate) -> Row:
        """Replace the given fields of a row."""
        changes = body.model_dump(exclude_unset=True)
        return Row(**await self._update(principal, ROWS, row_id, changes))

    async def delete_row(self, principal: Principal, row_id: str) -> None:
        """Delete a row with its racks and shelves."""
        await self._delete(principal, ROWS, row_id)

    # Racks --------------------------------------------------------------------------------

    async def list_racks(self, principal: Principal, query: RackListQuery) -> RackList:
        """A row's racks by position."""
        racks, total = await self._list(principal, RACKS, str(query.row_id), query)
        items = [Rack(**dict(rack)) for rack in racks]
        return RackList(racks=items, total=total, limit=query.limit, offset=query.offset)

    async def create_rack(self, principal: Principal, body: RackCreate) -> Rack:
        """Add a rack to a row."""
        return Rack(**await self._create(principal, RACKS, str(body.row_id), body.model_dump()))

    async def update_rack(self, principal: Principal, rack_id: str, body: RackUpdate) -> Rack:
        """Replace the given fields of a rack."""
        changes = body.model_dump(exclude_unset=True)
        return Rack(**await self._update(principal, RACKS, rack_id, changes))

    async def delete_rack(self, principal: Principal, rack_id: str) -> None:
        """Delete a rack with its shelves."""
        await self._delete(principal, RACKS, rack_id)

    # Shelves ------------------------------------------------------------------------------

    async def list_shelves(self, principal: Principal, query: ShelfListQuery) -> ShelfList:
        """A rack's shelves by level."""
        shelves, total = await self._list(principal, SHELVES, str(query.rack_id), query)
        items = [Shelf(**dict(shelf)) for shelf in shelves]
        return ShelfList(shelves=items, total=total, limit=query.limit, offset=query.offset)

    async def create_shelf(self, principal: Principal, body: ShelfCreate) -> Shelf:
        """Add an empty shelf to a rack."""
        fields = body.model_dump()
        return Shelf(**await self._create(principal, SHELVES, str(body.rack_id), fields))

    async def update_shelf(self, principal: Principal, shelf_id: str, body: ShelfUpdate) -> Shelf:
        """Replace the given fields of a shelf, its plant assignment included."""
        changes = body.model_dump(exclude_unset=True)
        return Shelf(**await self._update(principal, SHELVES, shelf_id, changes))

    async def delete_shelf(self, principal: Principal, shelf_id: str) -> None:
        """Delete a shelf and its plant data."""
        await self._delete(principal, SHELVES, shelf_id)

    # Shared -------------------------------------------------------------------------------

    async def _list(
        self, principal: Principal, level: Level, parent_id: str, query: PageQuery
    ) -> tuple[list[sqlite3.Row], int]:
        grant = await self._store.grant_on_parent(level, principal, parent_id)
        _authorize(principal, grant, Action.READ, level.parent_noun)
        return await self._store.list(level, principal, parent_id, query.limit, query.offset)

    async def _create(
        self, principal: Principal, level: Level, parent_id: str, fields: dict[str, Any]
    ) -> dict[str, Any]:
        grant = await self._store.grant_on_parent(level, principal, parent_id)
        _authorize(principal, grant, Action.MANAGE, level.parent_noun)
        fields.pop(level.parent_column)
        return _found(await self._store.create(level, parent_id, fields), level)

    async def _update(
        self, principal: Principal, level: Level, item_id: str, changes: dict[str, Any]
    ) -> dict[str, Any]:
        grant = await self._store.grant_on(level, principal, item_id)
        _authorize(principal, grant, Action.MANAGE, level.noun)
        return _found(await self._store.update(level, item_id, changes), level)

    async def _delete(self, principal: Principal, level: Level, item_id: str) -> None:
        grant = await self._store.grant_on(level, principal, item_id)
        _authorize(principal, grant, Action.MANAGE, level.noun)
        await self._store.delete(level, item_id)


def _authorize(
    principal: Principal, grant: PermissionType | None, action: Action, noun: str
) -> None:
    """404 for an item that is not there or not visible; 403 for one the grant does not cover."""
    if grant is None:
        raise NotFound(f"{noun} not found")
    authorize(principal, action, grant)


def _found(row: sqlite3.Row | None, level: Level) -> dict[str, Any]:
    """The item as a dict; ``None`` means it was deleted between the check and the read."""
    if row is None:
        raise NotFound(f"{level.noun} not found")
    return dict(row)
