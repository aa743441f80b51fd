"""Queries on ``auth_events``, the append-only authentication log (0002_identity.sql)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["insert_event", "list_events"]


async def insert_event(
    conn: Connection,
    event_type: str,
    *,
    user_id: UUID | None,
    email: str | None,
    session_id: UUID | None,
    ip: str | None,
    details: dict[str, Any],
) -> None:
    """Append one event."""
    await conn.execute(
        "INSERT INTO auth_events (user_id, email, event_type, session_id, ip, details)"
        " VALUES ($1, $2, $3, $4, $5::inet, $6::jsonb)",
        user_id,
        email,
        event_type,
        session_id,
        ip,
        details,
    )


async def list_events(
    conn: Connection,
    *,
    user_id: UUID | None,
    kind: str | None,
    since: datetime | None,
    limit: int,
    offset: int,
) -> tuple[list[asyncpg.Record], int]:
    """Events the connection may see, newest first, and their total before paging."""
    # NULL parameters switch a filter off, so one statement serves every combination.
    condition = (
        "($1::uuid IS NULL OR user_id = $1) AND ($2::text IS NULL OR event_type = $2)"
        " AND ($3::timestamptz IS NULL OR created_at >= $3)"
    )
    total = await conn.fetchval(
        f"SELECT count(*) FROM auth_events WHERE {condition}", user_id, kind, since
    )
    rows = await conn.fetch(
        "SELECT id, user_id, email, event_type, host(ip) AS address, details, created_at"
        f" FROM auth_events WHERE {condition}"
        " ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
        user_id,
        kind,
        since,
        limit,
        offset,
    )
    return list(rows), int(total)
