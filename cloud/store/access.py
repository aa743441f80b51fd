"""The caller's grant on one farm, as PostgreSQL decides it (docs/cloud-rls.md).

Visibility is row-level security's: a farm the caller may not read is simply not there. What
kind of grant a visible farm carries comes from the same `authz` helpers the write policies use,
so the role caps of protocol.access can be applied on top.
"""

from __future__ import annotations

from uuid import UUID

from cloud.store.db import Connection
from protocol.identity import PermissionType

__all__ = ["farm_grant"]


async def farm_grant(conn: Connection, farm_id: UUID) -> PermissionType | None:
    """``read_write``, ``read_only``, or ``None`` when the farm is absent or invisible."""
    writable: bool | None = await conn.fetchval(
        """
        SELECT f.id = ANY ((SELECT authz.writable_farm_ids())::uuid[]) OR (SELECT authz.is_admin())
        FROM farms AS f WHERE f.id = $1
        """,
        farm_id,
    )
    if writable is None:
        return None
    return PermissionType.READ_WRITE if writable else PermissionType.READ_ONLY
