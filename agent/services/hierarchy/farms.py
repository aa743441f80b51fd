"""Farm use cases: list with metrics, detail, create, update, delete."""

from __future__ import annotations

from collections.abc import Callable

from agent.services.live.fanout import FarmStatusChange
from agent.store.access import farm_grant
from agent.store.cache import GenerationCache
from agent.store.db import Database
from agent.store.farms import FarmStore
from protocol.access import Action, authorize, require_role
from protocol.errors import NotFound
from protocol.identity import Principal, Role
from protocol.schemas.farms import (
    Farm,
    FarmCreate,
    FarmDetail,
    FarmDeviceSummary,
    FarmList,
    FarmListItem,
    FarmListQuery,
    FarmMetrics,
    FarmRowSummary,
    FarmUpdate,
)

__all__ = ["FarmService"]

_METRICS = ("total_rows", "total_racks", "total_shelves", "active_plants")


class FarmService:
    """Farms as the caller may see and change them."""

    def __init__(
        self,
        db: Database,
        farms: FarmStore,
        on_change: Callable[[FarmStatusChange], None] | None = None,
    ) -> None:
        self._db = db
        self._farms = farms
        self._on_change = on_change
        # The farm list is the dashboard's most frequent read; it changes only when data does.
        self._lists: GenerationCache[tuple[str, str, str | None, int, int], FarmList] = (
            GenerationCache(db)
        )

    async def authorize(self, principal: Principal, farm_id: str, action: Action) -> None:
        """Raise 404 if the farm is not visible, 403 if the action is not allowed on it."""
        authorize(principal, action, await farm_grant(self._db, principal, farm_id))

    async def list(self, principal: Principal, query: FarmListQuery) -> FarmList:
        """Visible farms with metrics."""
        key = (principal.user_id, principal.role.value, query.search, query.limit, query.offset)

        async def load() -> FarmList:
            rows, total = await self._farms.list(principal, query.search, query.limit, query.offset)
            items = []
            for row in rows:
                data = dict(row)
                metrics = FarmMetrics(**{name: data.pop(name) for name in _METRICS})
                items.append(FarmListItem(**data, metrics=metrics))
            return FarmList(farms=items, total=total, limit=query.limit, offset=query.offset)

        return await self._lists.get_or_load(key, load)

    async def detail(self, principal: Principal, farm_id: str) -> FarmDetail:
        """A farm with its rows and devices."""
        await self.authorize(principal, farm_id, Action.READ)
        farm = await self._farms.get(farm_id)
        if farm is None:  # deleted between the check and the read
            raise NotFound("Farm not found")
        rows = [FarmRowSummary(**dict(r)) for r in await self._farms.rows_of(farm_id)]
        devices = [FarmDeviceSummary(**dict(d)) for d in await self._farms.devices_of(farm_id)]
        return FarmDetail(**dict(farm), rows=rows, devices=devices)

    async def create(self, principal: Principal, body: FarmCreate) -> Farm:
        """Create a farm; its creator holds read_write on it."""
        require_role(principal, Role.ADMIN, Role.FARM_MANAGER)
        row = await self._farms.create(body.model_dump(), principal.user_id)
        if row is None:
            raise NotFound("Farm not found")
        self._publish(row["id"], row["status"], {"event": "created", "name": row["name"]})
        return Farm(**dict(row))

    async def update(self, principal: Principal, farm_id: str, body: FarmUpdate) -> Farm:
        """Change the given fields of a farm."""
        await self.authorize(principal, farm_id, Action.MANAGE)
        before = await self._farms.get(farm_id)
        changes = body.model_dump(exclude_unset=True)
        row = await self._farms.update(farm_id, changes)
        if row is None:
            raise NotFound("Farm not found")
        self._publish(
            farm_id,
            row["status"],
            {
                "event": "updated",
                "name": row["name"],
                "previous_status": None if before is None else before["status"],
                "changed": sorted(changes),
            },
        )
        return Farm(**dict(row))

    async def delete(self, principal: Principal, farm_id: str) -> None:
        """Delete a farm and everything below it."""
        await self.authorize(principal, farm_id, Action.MANAGE)
        await self._farms.delete(farm_id)
        self._publish(farm_id, "deleted", {"event": "deleted"})

    def _publish(self, farm_id: str, status: str, data: dict[str, object]) -> None:
        """Tell the live streams (/ws/farm-status) that a farm changed."""
        if self._on_change is not None:
            self._on_change(FarmStatusChange(farm_id=farm_id, status=status, data=data))
