"""Per-farm permissions on the cloud (docs/design.md section 4): who may see and change which farm.

Row-level security shows each user their own grants and admins all of them, and lets only admins
write them (0005_row_level_security.sql). Unlike the agent, a farm manager does not share farms
here: granting and revoking on the cloud are admin operations, refused with 403.
"""

from __future__ import annotations

from uuid import UUID

import asyncpg

from cloud.store import permissions as store
from cloud.store import users as users_store
from cloud.store.db import Database
from protocol.access import require_role
from protocol.errors import Conflict, NotFound
from protocol.identity import PermissionType, Principal, Role
from protocol.schemas.users import Permission, PermissionCreate, PermissionList, PermissionQuery
from protocol.timefmt import iso

__all__ = ["PermissionService", "permission_model"]


def permission_model(row: asyncpg.Record) -> Permission:
    """The API view of a permission row."""
    return Permission(
        id=str(row["id"]),
        user_id=str(row["user_id"]),
        farm_id=str(row["farm_id"]),
        permission_type=PermissionType(row["permission_type"]),
        resource_type="farm",
        granted_at=iso(row["granted_at"]),
        granted_by=str(row["granted_by"]) if row["granted_by"] is not None else None,
    )


def _uuid(value: str | None) -> UUID | None:
    return UUID(value) if value is not None else None


class PermissionService:
    """Grants as the caller may see and change them."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, query: PermissionQuery) -> PermissionList:
        """Grants the caller may see (their own; admins all), newest first."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await store.list_permissions(
                conn,
                user_id=_uuid(query.user_id),
                farm_id=_uuid(query.farm_id),
                permission_type=query.permission_type.value if query.permission_type else None,
                limit=query.limit,
                offset=query.offset,
            )
        return PermissionList(
            permissions=[permission_model(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create(self, principal: Principal, body: PermissionCreate) -> Permission:
        """Grant a user access to a farm (admins); 409 if they already hold one."""
        require_role(principal, Role.ADMIN)
        farm_id, user_id = UUID(body.farm_id), UUID(body.user_id)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if await store.missing_farms(conn, [farm_id]):
                raise NotFound("Farm not found")
            if await users_store.get_user(conn, user_id) is None:
                raise NotFound("User not found")
            try:
                async with conn.transaction():
                    row = await store.create_permission(
                        conn,
                        user_id,
                        farm_id,
                        body.permission_type.value,
                        UUID(principal.user_id),
                    )
            except asyncpg.UniqueViolationError:
                raise Conflict("The user already holds a permission on this farm") from None
        return permission_model(row)

    async def delete(self, principal: Principal, permission_id: str) -> None:
        """Revoke a grant (admins); the user loses access at once."""
        require_role(principal, Role.ADMIN)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if not await store.delete_permission(conn, UUID(permission_id)):
                raise NotFound("Permission not found")
