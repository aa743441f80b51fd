"""What a cloud stream client may see: row-level security decides, as for every read."""

from __future__ import annotations

from uuid import UUID

from cloud.store.access import farm_grant
from cloud.store.db import Database
from protocol.identity import PermissionType, Principal
from protocol.live.scope import FarmVisibility

__all__ = ["CloudStreamScope"]


class CloudStreamScope:
    """The caller's farms as PostgreSQL's policies show them (docs/cloud-rls.md)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def visibility(self, principal: Principal) -> FarmVisibility:
        """The farms ``principal`` may see now."""
        if principal.is_admin:
            # Admins see every farm, including ones synced after they connected.
            return FarmVisibility(everything=True)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows = await conn.fetch("SELECT id FROM farms")
        return FarmVisibility(everything=False, farm_ids=frozenset(str(r["id"]) for r in rows))

    async def grant(self, principal: Principal, farm_id: str) -> PermissionType | None:
        """The caller's grant on a farm, or None if RLS hides it."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            return await farm_grant(conn, UUID(farm_id))
