"""Farm use cases on the mirror: list with metrics, detail, and the hierarchy below a farm.

Each call is one transaction on the user path; PostgreSQL decides visibility and the role caps
of protocol.access are applied to the grant it reports.
"""

from __future__ import annotations

from uuid import UUID

from cloud.store import farms as store
from cloud.store.access import farm_grant
from cloud.store.db import Connection, Database
from protocol.access import Action, authorize
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.schemas.farms import (
    FarmDetail,
    FarmDeviceSummary,
    FarmList,
    FarmListItem,
    FarmListQuery,
    FarmMetrics,
    FarmRowSummary,
    Rack,
    RackList,
    RackListQuery,
    RowList,
    RowListItem,
    RowListQuery,
    Shelf,
    ShelfList,
    ShelfListQuery,
)

__all__ = ["FarmService", "authorize_farm"]

_METRICS = ("total_rows", "total_racks", "total_shelves", "active_plants")


async def authorize_farm(
    conn: Connection, principal: Principal, farm_id: UUID | None, action: Action
) -> UUID:
    """404 unless the farm is visible, 403 unless the role and grant allow ``action``."""
    grant = await farm_grant(conn, farm_id) if farm_id is not None else None
    authorize(principal, action, grant)
    assert farm_id is not None  # authorize raised otherwise
    return farm_id


class FarmService:
    """Farms and their rows, racks and shelves, as the caller may see them."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, query: FarmListQuery) -> FarmList:
        """Visible farms with metrics."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await store.list_farms(conn, query.search, query.limit, query.offset)
        items = []
        for data in rows:
            metrics = FarmMetrics(**{name: data.pop(name) for name in _METRICS})
            items.append(FarmListItem(**data, metrics=metrics))
        return FarmList(farms=items, total=total, limit=query.limit, offset=query.offset)

    async def detail(self, principal: Principal, farm_id: str) -> FarmDetail:
        """A farm with its rows and devices."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, UUID(farm_id), Action.READ)
            farm = await store.farm(conn, UUID(farm_id))
            if farm is None:  # deleted since the check: READ COMMITTED sees each statement anew
                raise NotFound("Farm not found")
            rows = [FarmRowSummary(**r) for r in await store.farm_rows(conn, UUID(farm_id))]
            devices = [
                FarmDeviceSummary(**d) for d in await store.farm_devices(conn, UUID(farm_id))
            ]
        return FarmDetail(**farm, rows=rows, devices=devices)

    async def rows(self, principal: Principal, query: RowListQuery) -> RowList:
        """A farm's rows with counts below them."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await store.list_rows(conn, query.farm_id, query.limit, query.offset)
        return RowList(
            rows=[RowListItem(**r) for r in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def racks(self, principal: Principal, query: RackListQuery) -> RackList:
        """A row's racks."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            farm_id = await store.row_farm(conn, query.row_id)
            if farm_id is None:
                raise NotFound("Row not found")
            await authorize_farm(conn, principal, farm_id, Action.READ)
            racks, total = await store.list_racks(conn, query.row_id, query.limit, query.offset)
        return RackList(
            racks=[Rack(**r) for r in racks],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def shelves(self, principal: Principal, query: ShelfListQuery) -> ShelfList:
        """A rack's shelves."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            farm_id = await store.rack_farm(conn, query.rack_id)
            if farm_id is None:
                raise NotFound("Rack not found")
            await authorize_farm(conn, principal, farm_id, Action.READ)
            shelves, total = await store.list_shelves(
                conn, query.rack_id, query.limit, query.offset
            )
        return ShelfList(
            shelves=[Shelf(**s) for s in shelves],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )
