"""What a stream client may see, by the store's one visibility rule (agent/store/access.py)."""

from __future__ import annotations

from agent.store.access import farm_grant, visible_farm_filter
from agent.store.db import Database
from agent.store.devices import DeviceStore
from protocol.identity import PermissionType, Principal
from protocol.live.scope import FarmVisibility

__all__ = ["StreamScope"]


class StreamScope:
    """Farm visibility and device-to-farm lookups for the agent's streams."""

    def __init__(self, db: Database, devices: DeviceStore) -> None:
        self._db = db
        self._devices = devices

    async def visibility(self, principal: Principal) -> FarmVisibility:
        """The farms ``principal`` may see now."""
        if principal.is_admin:
            # Admins see every farm, including ones created after they connected.
            return FarmVisibility(everything=True)
        condition, params = visible_farm_filter(principal, "f.id")
        rows = await self._db.fetch_all(f"SELECT f.id FROM farms f WHERE {condition}", params)
        return FarmVisibility(everything=False, farm_ids=frozenset(row[0] for row in rows))

    async def grant(self, principal: Principal, farm_id: str) -> PermissionType | None:
        """The caller's grant on a farm, or None if it is not visible."""
        return await farm_grant(self._db, principal, farm_id)

    async def device_farms(self) -> dict[str, str]:
        """Every device's farm, in one query (device id to farm id)."""
        rows = await self._db.fetch_all("SELECT id, farm_id FROM devices")
        return {str(row[0]): str(row[1]) for row in rows}

    async def farm_of_device(self, device_id: str) -> str | None:
        """The farm a device belongs to, or None for an unknown device."""
        row = await self._devices.get(device_id)
        return None if row is None else str(row["farm_id"])
