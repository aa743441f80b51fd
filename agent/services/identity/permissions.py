"""Per-farm permissions (docs/design.md section 4): who may see and change which farm.

Admins grant anything; a farm manager shares the farms they may write (docs/design.md section 4:
farm managers "manage farms ... they may write"). Everyone sees their own grants.
"""

from __future__ import annotations

import sqlite3

from agent.services.identity.authority import IdentityAuthority
from agent.store.access import farm_grant
from agent.store.db import Database
from agent.store.permissions import PermissionStore
from agent.store.users import UserStore
from protocol.access import Action, authorize
from protocol.errors import Conflict, NotFound
from protocol.identity import PermissionType, Principal
from protocol.schemas.users import Permission, PermissionCreate, PermissionList, PermissionQuery

__all__ = ["PermissionService", "permission_model"]


def permission_model(row: sqlite3.Row) -> Permission:
    """The API view of a permission row."""
    return Permission(
        id=row["id"],
        user_id=row["user_id"],
        farm_id=row["farm_id"],
        permission_type=PermissionType(row["permission_type"]),
        resource_type="farm",
        granted_at=row["granted_at"],
        granted_by=row["granted_by"],
    )


class PermissionService:
    """Grants as the caller may see and change them."""

    def __init__(
        self,
        db: Database,
        permissions: PermissionStore,
        users: UserStore,
        authority: IdentityAuthority,
    ) -> None:
        self._authority = authority
        self._db = db
        self._permissions = permissions
        self._users = users

    async def list(self, principal: Principal, query: PermissionQuery) -> PermissionList:
        """Grants the caller may see, newest first."""
        filters = {
            "user_id": query.user_id,
            "farm_id": query.farm_id,
            "permission_type": query.permission_type.value if query.permission_type else None,
        }
        rows, total = await self._permissions.page(principal, filters, query.limit, query.offset)
        return PermissionList(
            permissions=[permission_model(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create(self, principal: Principal, body: PermissionCreate) -> Permission:
        """Grant a user access to a farm the caller manages; 409 if they already hold one."""
        self._authority.refuse_new("grant farm access")
        await self._authorize(principal, body.farm_id)
        if await self._users.by_id(body.user_id) is None:
            raise NotFound("User not found")
        try:
            row = await self._permissions.create(
                body.user_id, body.farm_id, body.permission_type.value, principal.user_id
            )
        except sqlite3.IntegrityError:
            raise Conflict("The user already holds a permission on this farm") from None
        return permission_model(row)

    async def delete(self, principal: Principal, permission_id: str) -> None:
        """Revoke a grant on a farm the caller manages."""
        row = await self._permissions.get(permission_id)
        if row is None:
            raise NotFound("Permission not found")
        grant = await farm_grant(self._db, principal, row["farm_id"])
        if grant is None:
            raise NotFound("Permission not found")
        authorize(principal, Action.MANAGE, grant)
        self._authority.refuse_new("revoke farm access")
        await self._permissions.delete(permission_id)

    async def _authorize(self, principal: Principal, farm_id: str) -> None:
        authorize(principal, Action.MANAGE, await farm_grant(self._db, principal, farm_id))
