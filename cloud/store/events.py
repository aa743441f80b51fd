"""Device events and alerts of the mirror, on a user-path connection (RLS picks the farms)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.farms import like_pattern
from cloud.store.records import plain

__all__ = ["insert_event", "list_events"]


async def list_events(
    conn: Connection,
    *,
    farm_id: UUID | None,
    device_id: UUID | None,
    severity: str | None,
    kind: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    offset: int,
    acknowledged: bool | None = None,
    search: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Visible events matching every filter given (``search``: kind or message contains it),
    newest first, and the total."""
    condition = """
        ($1::uuid IS NULL OR farm_id = $1) AND ($2::uuid IS NULL OR device_id = $2)
        AND ($3::text IS NULL OR severity = $3) AND ($4::text IS NULL OR kind = $4)
        AND ($5::timestamptz IS NULL OR ts >= $5) AND ($6::timestamptz IS NULL OR ts < $6)
        AND ($7::boolean IS NULL OR (acknowledged_at IS NOT NULL) = $7)
        AND ($8::text IS NULL OR kind ILIKE $8 OR message ILIKE $8)
    """
    pattern = like_pattern(search.strip()) if search and search.strip() else None
    filters = (farm_id, device_id, severity, kind, since, until, acknowledged)
    total: int = await conn.fetchval(
        f"SELECT count(*) FROM events WHERE {condition}", *filters, pattern
    )
    rows = await conn.fetch(
        "SELECT id, farm_id, device_id, kind, severity, message, data, ts AS timestamp,"
        f" acknowledged_at, acknowledged_by FROM events WHERE {condition}"
        " ORDER BY ts DESC, id LIMIT $9 OFFSET $10",
        *filters,
        pattern,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total


async def insert_event(
    conn: Connection,
    farm_id: UUID,
    kind: str,
    severity: str,
    message: str,
    data: Mapping[str, Any],
) -> UUID:
    """Record an event of the cloud's own (no agent, no device) in a farm's log; its id.

    On the user path row-level security lets it in only on a farm the caller may write.
    """
    event_id: UUID = await conn.fetchval(
        "INSERT INTO events (farm_id, kind, severity, message, data, ts)"
        " VALUES ($1, $2, $3, $4, $5, now()) RETURNING id",
        farm_id,
        kind,
        severity,
        message,
        dict(data),
    )
    return event_id
