"""Queries on ``permissions``, the per-farm grants (0003_farms.sql). Row-level security shows a
user their own grants and an admin all; only admins write."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "create_permission",
    "delete_permission",
    "farms_of",
    "list_permissions",
    "missing_farms",
    "replace_grants",
]

_COLUMNS = "id, user_id, farm_id, permission_type, granted_at, granted_by"


async def farms_of(conn: Connection, user_ids: Sequence[UUID]) -> dict[UUID, list[UUID]]:
    """The farms each user holds a visible permission on."""
    farms: dict[UUID, list[UUID]] = {user_id: [] for user_id in user_ids}
    rows = await conn.fetch(
        "SELECT user_id, farm_id FROM permissions WHERE user_id = ANY($1::uuid[])"
        " ORDER BY granted_at, farm_id",
        list(user_ids),
    )
    for row in rows:
        farms[row["user_id"]].append(row["farm_id"])
    return farms


async def missing_farms(conn: Connection, farm_ids: Sequence[UUID]) -> list[UUID]:
    """Those of ``farm_ids`` the connection cannot see."""
    rows = await conn.fetch(
        "SELECT f.id FROM unnest($1::uuid[]) AS f(id)"
        " WHERE NOT EXISTS (SELECT 1 FROM farms WHERE farms.id = f.id)",
        list(farm_ids),
    )
    return [row["id"] for row in rows]


async def replace_grants(
    conn: Connection, user_id: UUID, grants: Sequence[tuple[str, str]], granted_by: UUID
) -> None:
    """Make ``grants`` (farm id, type) the user's whole set; unchanged grants keep their id."""
    await conn.execute(
        "DELETE FROM permissions WHERE user_id = $1 AND NOT farm_id = ANY($2::uuid[])",
        user_id,
        [UUID(farm_id) for farm_id, _ in grants],
    )
    await conn.executemany(
        "INSERT INTO permissions (user_id, farm_id, permission_type, granted_by)"
        " VALUES ($1, $2, $3, $4) ON CONFLICT (user_id, farm_id) DO UPDATE"
        " SET permission_type = EXCLUDED.permission_type, granted_by = EXCLUDED.granted_by,"
        " granted_at = now()"
        " WHERE permissions.permission_type <> EXCLUDED.permission_type",
        [(user_id, UUID(farm_id), kind, granted_by) for farm_id, kind in grants],
    )


async def list_permissions(
    conn: Connection,
    *,
    user_id: UUID | None,
    farm_id: UUID | None,
    permission_type: str | None,
    limit: int,
    offset: int,
) -> tuple[list[asyncpg.Record], int]:
    """Visible grants newest first, and their total before paging."""
    condition = (
        "($1::uuid IS NULL OR user_id = $1) AND ($2::uuid IS NULL OR farm_id = $2)"
        " AND ($3::text IS NULL OR permission_type = $3)"
    )
    params = (user_id, farm_id, permission_type)
    total = await conn.fetchval(f"SELECT count(*) FROM permissions WHERE {condition}", *params)
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM permissions WHERE {condition}"
        " ORDER BY granted_at DESC, id LIMIT $4 OFFSET $5",
        *params,
        limit,
        offset,
    )
    return list(rows), int(total)


async def create_permission(
    conn: Connection, user_id: UUID, farm_id: UUID, permission_type: str, granted_by: UUID
) -> asyncpg.Record:
    """Insert a grant (admins); raises UniqueViolationError if the user holds one already."""
    row = await conn.fetchrow(
        "INSERT INTO permissions (user_id, farm_id, permission_type, granted_by)"
        f" VALUES ($1, $2, $3, $4) RETURNING {_COLUMNS}",
        user_id,
        farm_id,
        permission_type,
        granted_by,
    )
    assert row is not None  # INSERT ... RETURNING without ON CONFLICT returns the row
    return row


async def delete_permission(conn: Connection, permission_id: UUID) -> bool:
    """Delete a grant (admins)."""
    status: str = await conn.execute("DELETE FROM permissions WHERE id = $1", permission_id)
    return status != "DELETE 0"
