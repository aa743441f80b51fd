"""Threshold alerts of the mirror, on a user-path connection (RLS picks the farms).

The agent does not send its alerts table; it records each raise and clear as an event
(``alert_raised``/``alert_cleared``) whose data is the alert row as it stood then, and events
are mirrored. An alert is therefore the data of its newest event: its clear when there is one
(a cleared alert never becomes active again; a new breach raises a new alert).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.farms import like_pattern

__all__ = ["list_alerts"]


async def list_alerts(
    conn: Connection,
    *,
    farm_id: UUID | None,
    device_id: UUID | None,
    state: str | None,
    limit: int,
    offset: int,
    search: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Visible alerts (their rows as the agent sent them) matching every filter given, newest
    raised first, and the total."""
    rows = await conn.fetch(
        """
        WITH latest AS (
            SELECT DISTINCT ON (data->>'id') data
            FROM events
            WHERE kind IN ('alert_raised', 'alert_cleared') AND data ? 'id'
              AND ($1::uuid IS NULL OR farm_id = $1)
            ORDER BY data->>'id', (kind = 'alert_cleared') DESC, ts DESC
        )
        SELECT data, count(*) OVER () AS total FROM latest
        WHERE ($2::text IS NULL OR data->>'device_id' = $2)
          AND ($3::text IS NULL OR data->>'state' = $3)
          AND ($6::text IS NULL OR data->>'metric' ILIKE $6 OR data->>'severity' ILIKE $6
               OR data->>'device_id' IN (SELECT id::text FROM devices WHERE name ILIKE $6))
        ORDER BY data->>'raised_at' DESC, data->>'id'
        LIMIT $4 OFFSET $5
        """,
        farm_id,
        None if device_id is None else str(device_id),
        state,
        limit,
        offset,
        like_pattern(search.strip()) if search and search.strip() else None,
    )
    if rows:
        total: int = rows[0]["total"]
    elif offset == 0:
        total = 0
    else:  # a page past the end: count on the first page
        _, total = await list_alerts(
            conn,
            farm_id=farm_id,
            device_id=device_id,
            state=state,
            limit=1,
            offset=0,
            search=search,
        )
    return [dict(row["data"]) for row in rows], total
