"""Queries on ``users`` for user management (user path: row-level security decides the rows,
so a non-admin finds only their own)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "count_active_admins",
    "create_user",
    "delete_user",
    "get_user",
    "list_users",
    "update_user",
]

_COLUMNS = (
    "id, email, full_name, role, status, plan, email_verified, mfa_enabled, password_hash,"
    " last_login, created_at, updated_at"
)
# Columns a caller may set through update_user; names are never taken from a request.
_WRITABLE = frozenset(
    {
        "email",
        "full_name",
        "role",
        "status",
        "plan",
        "password_hash",
        "password_changed_at",
        "mfa_enabled",
        "mfa_secret",
        "mfa_confirmed_at",
        "mfa_last_step",
    }
)


async def list_users(
    conn: Connection, role: str | None, status: str | None, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """Users by e-mail, and their total before paging."""
    condition = "($1::text IS NULL OR role = $1) AND ($2::text IS NULL OR status = $2)"
    total = await conn.fetchval(f"SELECT count(*) FROM users WHERE {condition}", role, status)
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM users WHERE {condition}"
        " ORDER BY lower(email), id LIMIT $3 OFFSET $4",
        role,
        status,
        limit,
        offset,
    )
    return list(rows), int(total)


async def get_user(conn: Connection, user_id: UUID) -> asyncpg.Record | None:
    """One user, if visible."""
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM users WHERE id = $1", user_id)


async def create_user(
    conn: Connection,
    *,
    email: str,
    password_hash: str,
    role: str,
    full_name: str,
    plan: str,
    status: str,
) -> asyncpg.Record:
    """Insert a user (admins), verified: the admin vouches for the address, so the account
    signs in without a mail; raises UniqueViolationError for a taken address."""
    row = await conn.fetchrow(
        "INSERT INTO users (email, password_hash, role, full_name, plan, status,"
        " email_verified, password_changed_at) VALUES ($1, $2, $3, $4, $5, $6, true, now())"
        f" RETURNING {_COLUMNS}",
        email,
        password_hash,
        role,
        full_name,
        plan,
        status,
    )
    assert row is not None  # INSERT ... RETURNING without ON CONFLICT returns the row
    return row


async def update_user(conn: Connection, user_id: UUID, changes: dict[str, Any]) -> bool:
    """Set ``changes``; ``False`` if the user is not visible. Raises UniqueViolationError for a
    taken address, InsufficientPrivilegeError for an admin-only column."""
    unknown = changes.keys() - _WRITABLE
    if unknown:
        raise ValueError(f"not writable: {sorted(unknown)}")
    if not changes:
        return await get_user(conn, user_id) is not None
    names = list(changes)
    assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=2))
    status: str = await conn.execute(
        f"UPDATE users SET {assignments} WHERE id = $1", user_id, *changes.values()
    )
    return status != "UPDATE 0"


async def delete_user(conn: Connection, user_id: UUID) -> bool:
    """Delete a user; sessions, keys and grants cascade, auth events keep a NULL user."""
    status: str = await conn.execute("DELETE FROM users WHERE id = $1", user_id)
    return status != "DELETE 0"


async def count_active_admins(conn: Connection) -> int:
    """Active admins (as an admin sees them: all), locked until the transaction ends.

    The lock serializes two admins demoting each other at once: the second waits for the
    first, then counts what it left, so the last admin is never removed by a race.
    """
    count: int = await conn.fetchval(
        "SELECT count(*) FROM (SELECT id FROM users WHERE role = 'admin' AND status = 'active'"
        " FOR UPDATE) AS admins"
    )
    return count
