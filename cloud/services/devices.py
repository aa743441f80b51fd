"""Devices of the mirror as the caller may see them."""

from __future__ import annotations

from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.store import devices as store
from cloud.store.db import Database
from protocol.access import Action
from protocol.identity import Principal
from protocol.schemas.devices import Device, DeviceList, DeviceListQuery

__all__ = ["DeviceService"]


class DeviceService:
    """Lists devices; a farm filter naming an invisible farm is a 404."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, query: DeviceListQuery) -> DeviceList:
        """Visible devices, filtered and paged."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await store.list_devices(
                conn,
                farm_id=query.farm_id,
                kind=query.kind,
                device_type=query.device_type,
                status=query.status,
                limit=query.limit,
                offset=query.offset,
                location=query.location,
                search=query.q,
                sort=query.sort,
            )
        devices = []
        for row in rows:
            # The mirror stores "no address" as an empty object.
            row["address"] = row["address"] or None
            devices.append(Device(**row))
        return DeviceList(devices=devices, total=total, limit=query.limit, offset=query.offset)
