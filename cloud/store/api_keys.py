"""Queries on ``api_keys`` (0002_identity.sql): admins manage them on the user path; the key's
caller is looked up by hash on the system path (the caller is not known yet)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["caller", "create_key", "get_key", "list_keys", "revoke_key", "touch_key"]

_COLUMNS = "id, user_id, name, prefix, created_by, created_at, last_used_at, revoked_at"


async def create_key(
    conn: Connection, user_id: UUID, name: str, prefix: str, key_hash: bytes, created_by: UUID
) -> asyncpg.Record:
    """Insert a key (admins)."""
    row = await conn.fetchrow(
        "INSERT INTO api_keys (user_id, name, prefix, key_hash, created_by)"
        f" VALUES ($1, $2, $3, $4, $5) RETURNING {_COLUMNS}",
        user_id,
        name,
        prefix,
        key_hash,
        created_by,
    )
    assert row is not None  # INSERT ... RETURNING without ON CONFLICT returns the row
    return row


async def get_key(conn: Connection, key_id: UUID) -> asyncpg.Record | None:
    """One visible key."""
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM api_keys WHERE id = $1", key_id)


async def list_keys(
    conn: Connection, user_id: UUID | None, include_revoked: bool, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """Visible keys newest first, and their total before paging."""
    condition = "($1::uuid IS NULL OR user_id = $1) AND ($2 OR revoked_at IS NULL)"
    total = await conn.fetchval(
        f"SELECT count(*) FROM api_keys WHERE {condition}", user_id, include_revoked
    )
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM api_keys WHERE {condition}"
        " ORDER BY created_at DESC, id LIMIT $3 OFFSET $4",
        user_id,
        include_revoked,
        limit,
        offset,
    )
    return list(rows), int(total)


async def revoke_key(conn: Connection, key_id: UUID) -> bool:
    """Revoke a key at once; ``False`` if it was already revoked or is not visible."""
    status: str = await conn.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", key_id
    )
    return status != "UPDATE 0"


async def caller(conn: Connection, key_hash: bytes) -> asyncpg.Record | None:
    """The user of a current key (system path): unrevoked, unexpired."""
    return await conn.fetchrow(
        "SELECT k.id AS key_id, k.last_used_at, u.id, u.email, u.role, u.plan, u.status"
        " FROM api_keys AS k JOIN users AS u ON u.id = k.user_id"
        " WHERE k.key_hash = $1 AND k.revoked_at IS NULL"
        " AND (k.expires_at IS NULL OR k.expires_at > now())",
        key_hash,
    )


async def touch_key(conn: Connection, key_id: UUID, stale_before: datetime) -> None:
    """Stamp ``last_used_at`` if older than ``stale_before`` (one write a while, not per
    request)."""
    await conn.execute(
        "UPDATE api_keys SET last_used_at = now()"
        " WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)",
        key_id,
        stale_before,
    )
