"""What the shared hub integration (``integrations.home_assistant.service``) needs of the cloud:
a caller's grant on a farm and the farm's event log, both as PostgreSQL's row-level security
decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from cloud.store.access import farm_grant
from cloud.store.db import Database
from cloud.store.events import insert_event
from protocol.identity import PermissionType, Principal

__all__ = ["HubFarmLog"]


class HubFarmLog:
    """Grants and event records for the hub integration, over the cloud's database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def grant(self, principal: Principal, farm_id: str) -> PermissionType | None:
        """The caller's grant on the farm (``None``: absent or invisible to them)."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            return await farm_grant(conn, UUID(farm_id))

    async def record(
        self,
        farm_id: str,
        kind: str,
        message: str,
        data: Mapping[str, Any],
        *,
        severity: str = "info",
        by: Principal | None = None,
    ) -> str:
        """An event in the farm's log: a caller's action on their own path (RLS checks they
        may write the farm), the cloud's own (a close at the end of a duration) on the system
        path."""
        if by is not None:
            async with self._db.as_user(UUID(by.user_id)) as conn:
                event_id = await insert_event(conn, UUID(farm_id), kind, severity, message, data)
        else:
            async with self._db.as_system() as conn:
                event_id = await insert_event(conn, UUID(farm_id), kind, severity, message, data)
        return str(event_id)
