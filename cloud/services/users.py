"""User management (admins) and the caller's own profile on the cloud (docs/design.md
section 12); the same endpoints and rules as the agent's.

Every call runs on the user path: row-level security decides which users, grants and farms the
caller sees and may write (docs/cloud-rls.md); the admin-only operations are also checked here,
so the caller gets a 403 rather than an empty answer. Changes reach agents through the identity
delta, which reads these same tables (cloud/services/sync_delta.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

import asyncpg

from cloud.services.sessions import AuthEventRecorder
from cloud.store import identity as sessions_store
from cloud.store import permissions as grants_store
from cloud.store import users as store
from cloud.store.db import Connection, Database
from farmkit.passwords import check_password, new_password_hash
from protocol.access import require_role
from protocol.errors import BadRequest, Conflict, InvalidCredentials, NotFound, ValidationFailed
from protocol.identity import Plan, Principal, Role
from protocol.schemas.users import (
    ProfileUpdate,
    RoleChange,
    User,
    UserCreate,
    UserList,
    UserListQuery,
    UserUpdate,
)
from protocol.timefmt import iso
from protocol.user_rules import ends_an_admin, farms_access_grants, grant_pairs

__all__ = ["UserService", "VerificationSender", "user_model"]

_TAKEN = "A user with this email already exists"


class VerificationSender(Protocol):
    """Mails a user a link proving their address (protocol/identity_flows/account_flows.py)."""

    async def send_verification(self, user: asyncpg.Record) -> None:
        """Send the verification mail to ``user["email"]``."""
        ...


def user_model(row: asyncpg.Record, farms: Sequence[UUID]) -> User:
    """The API view of a user row (no password hash, no MFA secret)."""
    return User(
        id=str(row["id"]),
        email=row["email"],
        full_name=row["full_name"],
        role=Role(row["role"]),
        status=row["status"],
        plan=Plan(row["plan"]),
        email_verified=row["email_verified"],
        mfa_enabled=row["mfa_enabled"],
        last_login=iso(row["last_login"]) if row["last_login"] else None,
        created_at=iso(row["created_at"]),
        updated_at=iso(row["updated_at"]),
        farms_access=[str(farm_id) for farm_id in farms],
    )


class UserService:
    """Users as admins manage them, and each user's own profile."""

    def __init__(
        self, db: Database, events: AuthEventRecorder, verification: VerificationSender
    ) -> None:
        self._db = db
        self._events = events
        self._verification = verification

    async def list(self, principal: Principal, query: UserListQuery) -> UserList:
        """Users by email (admins only)."""
        require_role(principal, Role.ADMIN)
        role = query.role.value if query.role else None
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await store.list_users(
                conn, role, query.status, query.limit, query.offset
            )
            farms = await grants_store.farms_of(conn, [row["id"] for row in rows])
        users = [user_model(row, farms[row["id"]]) for row in rows]
        return UserList(users=users, total=total, limit=query.limit, offset=query.offset)

    async def get(self, principal: Principal, user_id: str) -> User:
        """One user: admins any, others themselves."""
        if user_id != principal.user_id:
            require_role(principal, Role.ADMIN)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            return await self._view(conn, await _row(conn, UUID(user_id)))

    async def create(self, principal: Principal, body: UserCreate) -> User:
        """Create a user with a role and farm grants (admins only)."""
        require_role(principal, Role.ADMIN)
        password_hash = await new_password_hash(body.password)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await _check_farms(conn, body.farms_access, "farms_access")
            try:
                async with conn.transaction():  # a savepoint: the 409 leaves nothing behind
                    row = await store.create_user(
                        conn,
                        email=body.email,
                        password_hash=password_hash,
                        role=body.role.value,
                        full_name=body.full_name,
                        plan=body.plan.value,
                        status=body.status,
                    )
            except asyncpg.UniqueViolationError:
                raise Conflict(_TAKEN) from None
            await grants_store.replace_grants(
                conn,
                row["id"],
                farms_access_grants(body.farms_access, body.role),
                UUID(principal.user_id),
            )
            return await self._view(conn, row)

    async def update(self, principal: Principal, user_id: str, body: UserUpdate) -> User:
        """Change the given fields of a user (admins only); a new password or a suspension
        ends the user's sessions."""
        require_role(principal, Role.ADMIN)
        target = UUID(user_id)
        fields = body.model_dump(exclude_unset=True)
        farms_access = fields.pop("farms_access", None)
        password = fields.pop("password", None)
        changes: dict[str, Any] = {
            name: value.value if isinstance(value, Role | Plan) else value
            for name, value in fields.items()
        }
        if changes.pop("mfa_enabled", None) is False:
            changes.update(
                mfa_enabled=False, mfa_secret=None, mfa_confirmed_at=None, mfa_last_step=None
            )
        if password is not None:
            changes["password_hash"] = await new_password_hash(password)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await _row(conn, target)
            await _keep_an_admin(conn, row, changes.get("role"), changes.get("status"))
            if farms_access is not None:
                await _check_farms(conn, farms_access, "farms_access")
            await _save(conn, target, changes)
            if farms_access is not None:
                role = Role(changes.get("role", row["role"]))
                await grants_store.replace_grants(
                    conn, target, farms_access_grants(farms_access, role), UUID(principal.user_id)
                )
            reason = "password_changed" if password is not None else None
            if changes.get("status") == "suspended":
                reason = reason or "suspended"
            count = 0
            if reason is not None:
                count = await sessions_store.revoke_sessions_of(conn, target, reason)
            view = await self._view(conn, await _row(conn, target))
        if reason is not None:
            await self._events.record(
                "sessions_revoked", user_id=target, reason=reason, by=principal.user_id, count=count
            )
        return view

    async def change_role(self, principal: Principal, body: RoleChange) -> User:
        """Set a user's role and/or replace their farm grants (admins only)."""
        require_role(principal, Role.ADMIN)
        target = UUID(body.user_id)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await _row(conn, target)
            if body.role is not None:
                await _keep_an_admin(conn, row, body.role.value, None)
            if body.permissions is not None:
                await _check_farms(conn, [g.farm_id for g in body.permissions], "permissions")
            if body.role is not None:
                await _save(conn, target, {"role": body.role.value})
            if body.permissions is not None:
                await grants_store.replace_grants(
                    conn, target, grant_pairs(body.permissions), UUID(principal.user_id)
                )
            return await self._view(conn, await _row(conn, target))

    async def delete(self, principal: Principal, user_id: str) -> None:
        """Remove a user with their sessions, keys and grants (admins only, not themselves)."""
        require_role(principal, Role.ADMIN)
        if user_id == principal.user_id:
            raise BadRequest("Admins cannot delete their own account")
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await _row(conn, UUID(user_id))
            await _keep_an_admin(conn, row, Role.USER.value, None)
            await store.delete_user(conn, row["id"])

    async def profile(self, principal: Principal) -> User:
        """The caller's own account."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            return await self._view(conn, await _row(conn, UUID(principal.user_id)))

    async def update_profile(
        self, principal: Principal, body: ProfileUpdate, address: str | None
    ) -> User:
        """Change the caller's name, email or password (the last two need the password); a
        new password ends the caller's other sessions."""
        me = UUID(principal.user_id)
        async with self._db.as_user(me) as conn:
            row = await _row(conn, me)
        if body.current_password is not None and not await check_password(
            body.current_password, row["password_hash"]
        ):
            raise InvalidCredentials("Current password is wrong")
        changes: dict[str, Any] = {}
        if body.full_name is not None:
            changes["full_name"] = body.full_name
        new_email = body.email is not None and body.email != row["email"]
        if new_email:
            # The users_touch trigger marks the new address unverified (0009).
            changes["email"] = body.email
        if body.password is not None:
            changes["password_hash"] = await new_password_hash(body.password)
        keep = UUID(principal.session_id) if principal.session_id else None
        async with self._db.as_user(me) as conn:
            await _save(conn, me, changes)
            if body.password is not None:
                # A changed password ends every other session (it may have been stolen).
                await sessions_store.revoke_sessions_of(conn, me, "password_changed", keep=keep)
            updated = await _row(conn, me)
            view = await self._view(conn, updated)
        if body.password is not None:
            await self._events.record(
                "password_changed", user_id=me, email=row["email"], address=address
            )
        if new_email:
            await self._verification.send_verification(updated)
        return view

    @staticmethod
    async def _view(conn: Connection, row: asyncpg.Record) -> User:
        farms = await grants_store.farms_of(conn, [row["id"]])
        return user_model(row, farms[row["id"]])


async def _row(conn: Connection, user_id: UUID) -> asyncpg.Record:
    row = await store.get_user(conn, user_id)
    if row is None:
        raise NotFound("User not found")
    return row


async def _save(conn: Connection, user_id: UUID, changes: dict[str, Any]) -> None:
    try:
        async with conn.transaction():  # a savepoint: the 409 leaves the transaction usable
            await store.update_user(conn, user_id, changes)
    except asyncpg.UniqueViolationError:
        raise Conflict(_TAKEN) from None


async def _check_farms(conn: Connection, farm_ids: Sequence[str], field: str) -> None:
    missing = await grants_store.missing_farms(conn, [UUID(farm_id) for farm_id in farm_ids])
    if missing:
        raise ValidationFailed.of((field, f"no such farm: {farm_id}") for farm_id in missing)


async def _keep_an_admin(
    conn: Connection, row: asyncpg.Record, role: str | None, status: str | None
) -> None:
    """Refuse to demote, suspend or delete the last active admin (nobody could fix it)."""
    if (
        ends_an_admin(row["role"], row["status"], role, status)
        and await store.count_active_admins(conn) <= 1
    ):
        raise BadRequest("This is the last active admin")
