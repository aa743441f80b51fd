"""User management (admins) and the caller's own profile (docs/design.md section 12)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.authority import IdentityAuthority
from agent.services.identity.flows import AgentAccountFlows
from agent.services.identity.views import user_model
from agent.store.permissions import PermissionStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from farmkit.passwords import check_password, new_password_hash
from protocol.access import require_role
from protocol.errors import BadRequest, Conflict, InvalidCredentials, NotFound, ValidationFailed
from protocol.identity import Principal, Role
from protocol.schemas.users import (
    ProfileUpdate,
    RoleChange,
    User,
    UserCreate,
    UserList,
    UserListQuery,
    UserUpdate,
)
from protocol.user_rules import ends_an_admin, farms_access_grants, grant_pairs

__all__ = ["UserService"]


class UserService:
    """Users as admins manage them, and each user's own profile."""

    def __init__(
        self,
        users: UserStore,
        permissions: PermissionStore,
        sessions: SessionStore,
        flows: AgentAccountFlows,
        events: AuthEvents,
        authority: IdentityAuthority,
    ) -> None:
        self._authority = authority
        self._users = users
        self._permissions = permissions
        self._sessions = sessions
        self._flows = flows
        self._events = events

    async def list(self, principal: Principal, query: UserListQuery) -> UserList:
        """Users by email (admins only)."""
        require_role(principal, Role.ADMIN)
        rows, total = await self._users.list(query.role, query.status, query.limit, query.offset)
        farms = await self._permissions.farms_of([row["id"] for row in rows])
        users = [user_model(row, farms[row["id"]]) for row in rows]
        return UserList(users=users, total=total, limit=query.limit, offset=query.offset)

    async def get(self, principal: Principal, user_id: str) -> User:
        """One user: admins any, others themselves."""
        if user_id != principal.user_id:
            require_role(principal, Role.ADMIN)
        return await self._view(await self._row(user_id))

    async def create(self, principal: Principal, body: UserCreate) -> User:
        """Create a user with a role and farm grants (admins only)."""
        require_role(principal, Role.ADMIN)
        self._authority.refuse_new("create a user")
        await self._check_farms(body.farms_access, "farms_access")
        try:
            row = await self._users.create(
                email=body.email,
                password_hash=await new_password_hash(body.password),
                role=body.role.value,
                full_name=body.full_name,
                plan=body.plan.value,
                status=body.status,
                # The admin vouches for the address: the account signs in without a mail.
                email_verified=1,
            )
        except sqlite3.IntegrityError:
            raise Conflict("A user with this email already exists") from None
        grants = farms_access_grants(body.farms_access, body.role)
        await self._permissions.replace(row["id"], grants, principal.user_id)
        return await self._view(row)

    async def update(self, principal: Principal, user_id: str, body: UserUpdate) -> User:
        """Change the given fields of a user (admins only)."""
        require_role(principal, Role.ADMIN)
        row = await self._row(user_id)
        self._authority.refuse_for(row, "change a user")
        fields = body.model_dump(exclude_unset=True)
        farms_access = fields.pop("farms_access", None)
        if farms_access is not None:
            self._authority.refuse_new("grant farm access")
        password = fields.pop("password", None)
        changes: dict[str, Any] = {}
        for name, value in fields.items():
            changes[name] = value.value if isinstance(value, Role) else value
        if changes.pop("mfa_enabled", None) is False:
            changes.update(mfa_enabled=0, mfa_secret=None, mfa_last_step=None)
        await self._keep_an_admin(row, changes.get("role"), changes.get("status"))
        if "email" in changes and changes["email"] != row["email"]:
            changes["email_verified"] = 0
        if password is not None:
            changes["password_hash"] = await new_password_hash(password)
        if farms_access is not None:
            await self._check_farms(farms_access, "farms_access")
        await self._save(user_id, changes)
        if farms_access is not None:
            role = Role(changes.get("role", row["role"]))
            grants = farms_access_grants(farms_access, role)
            await self._permissions.replace(user_id, grants, principal.user_id)
        if password is not None or changes.get("status") == "suspended":
            reason = "password_changed" if password is not None else "suspended"
            count = await self._sessions.revoke_all(user_id, reason)
            await self._events.record(
                "sessions_revoked",
                user_id=user_id,
                reason=reason,
                by=principal.user_id,
                count=count,
            )
        return await self._view(await self._row(user_id))

    async def change_role(self, principal: Principal, body: RoleChange) -> User:
        """Set a user's role and/or replace their farm grants (admins only)."""
        require_role(principal, Role.ADMIN)
        row = await self._row(body.user_id)
        self._authority.refuse_for(row, "change a role")
        if body.permissions is not None:
            self._authority.refuse_new("grant farm access")
        if body.role is not None:
            await self._keep_an_admin(row, body.role.value, None)
        if body.permissions is not None:
            await self._check_farms([grant.farm_id for grant in body.permissions], "permissions")
        if body.role is not None:
            await self._save(body.user_id, {"role": body.role.value})
        if body.permissions is not None:
            await self._permissions.replace(
                body.user_id, grant_pairs(body.permissions), principal.user_id
            )
        return await self._view(await self._row(body.user_id))

    async def delete(self, principal: Principal, user_id: str) -> None:
        """Remove a user with their sessions, keys and grants (admins only, not themselves)."""
        require_role(principal, Role.ADMIN)
        if user_id == principal.user_id:
            raise BadRequest("Admins cannot delete their own account")
        row = await self._row(user_id)
        self._authority.refuse_for(row, "delete a user")
        await self._keep_an_admin(row, Role.USER.value, None)
        await self._users.delete(user_id)

    async def profile(self, principal: Principal) -> User:
        """The caller's own account."""
        return await self._view(await self._row(principal.user_id))

    async def update_profile(
        self, principal: Principal, body: ProfileUpdate, address: str | None
    ) -> User:
        """Change the caller's name, email or password (the last two need the password)."""
        row = await self._row(principal.user_id)
        self._authority.refuse_for(row, "change your profile")
        changes: dict[str, Any] = {}
        if body.current_password is not None and not await check_password(
            body.current_password, row["password_hash"]
        ):
            raise InvalidCredentials("Current password is wrong")
        if body.full_name is not None:
            changes["full_name"] = body.full_name
        new_email = body.email is not None and body.email != row["email"]
        if new_email:
            changes.update(email=body.email, email_verified=0)
        if body.password is not None:
            changes["password_hash"] = await new_password_hash(body.password)
        await self._save(principal.user_id, changes)
        updated = await self._row(principal.user_id)
        if body.password is not None:
            # A changed password ends every other session (it may have been stolen).
            await self._sessions.revoke_all(
                principal.user_id, "password_changed", keep=principal.session_id
            )
            await self._events.record(
                "password_changed", user_id=principal.user_id, email=row["email"], address=address
            )
        if new_email:
            await self._flows.send_verification(updated)
        return await self._view(updated)

    async def _row(self, user_id: str) -> sqlite3.Row:
        row = await self._users.by_id(user_id)
        if row is None:
            raise NotFound("User not found")
        return row

    async def _view(self, row: sqlite3.Row) -> User:
        farms = await self._permissions.farms_of([row["id"]])
        return user_model(row, farms[row["id"]])

    async def _save(self, user_id: str, changes: dict[str, Any]) -> None:
        try:
            await self._users.update(user_id, changes)
        except sqlite3.IntegrityError:
            raise Conflict("A user with this email already exists") from None

    async def _check_farms(self, farm_ids: Sequence[str], field: str) -> None:
        missing = await self._permissions.missing_farms(farm_ids)
        if missing:
            raise ValidationFailed.of((field, f"no such farm: {farm_id}") for farm_id in missing)

    async def _keep_an_admin(self, row: sqlite3.Row, role: str | None, status: str | None) -> None:
        """Refuse to demote, suspend or delete the last active admin (nobody could fix it)."""
        if (
            ends_an_admin(row["role"], row["status"], role, status)
            and await self._users.count_active_admins() <= 1
        ):
            raise BadRequest("This is the last active admin")
