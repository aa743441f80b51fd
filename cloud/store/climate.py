"""Climate settings, history and the latest climate readings of the mirror, on a user-path
connection: row-level security picks the farms."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "farm_sensors",
    "history",
    "latest_loop_entries",
    "latest_samples",
    "settings_of_farms",
    "visible_farms",
]


async def visible_farms(conn: Connection, farm_id: UUID | None) -> list[UUID]:
    """Ids of the visible farms (or just ``farm_id``), oldest first, as the agent orders them."""
    rows = await conn.fetch(
        "SELECT id FROM farms WHERE ($1::uuid IS NULL OR id = $1) ORDER BY created_at, id::text",
        farm_id,
    )
    return [r["id"] for r in rows]


async def settings_of_farms(conn: Connection, farm_ids: Sequence[UUID]) -> list[asyncpg.Record]:
    """The settings documents of the farms: each farm's own first, then its rows' by row id."""
    rows = await conn.fetch(
        "SELECT id, farm_id, settings FROM climate_settings WHERE farm_id = ANY($1::uuid[])"
        " ORDER BY farm_id::text, settings->>'row_id' IS NOT NULL, settings->>'row_id'",
        list(farm_ids),
    )
    return list(rows)


async def farm_sensors(conn: Connection, farm_id: UUID) -> list[UUID]:
    """The farm's sensors."""
    rows = await conn.fetch(
        "SELECT id FROM devices WHERE farm_id = $1 AND kind = 'sensor' ORDER BY id", farm_id
    )
    return [r["id"] for r in rows]


async def latest_samples(
    conn: Connection, device_ids: Sequence[UUID], metrics: Sequence[str]
) -> list[asyncpg.Record]:
    """Each device's newest reading of each metric (device_id, metric, value, unit, ts)."""
    rows = await conn.fetch(
        """
        SELECT d.device_id, m.metric, r.value, r.unit, r.ts
        FROM unnest($1::uuid[]) AS d (device_id)
        CROSS JOIN unnest($2::text[]) AS m (metric)
        CROSS JOIN LATERAL (
            SELECT value, unit, ts FROM readings
            WHERE device_id = d.device_id AND metric = m.metric
            ORDER BY ts DESC LIMIT 1
        ) AS r
        """,
        list(device_ids),
        list(metrics),
    )
    return list(rows)


async def latest_loop_entries(conn: Connection, settings_id: UUID) -> list[asyncpg.Record]:
    """A settings' newest loop entry (action, fail-safe or hold) and its newest action or
    fail-safe, newest first (one row when they are the same)."""
    rows = await conn.fetch(
        """
        (SELECT id, kind, at, data FROM climate_history
         WHERE settings_id = $1 AND kind IN ('action', 'failsafe', 'hold')
         ORDER BY at DESC, received DESC LIMIT 1)
        UNION
        (SELECT id, kind, at, data FROM climate_history
         WHERE settings_id = $1 AND kind IN ('action', 'failsafe')
         ORDER BY at DESC, received DESC LIMIT 1)
        ORDER BY at DESC
        """,
        settings_id,
    )
    return list(rows)


async def history(
    conn: Connection,
    farm_id: UUID,
    *,
    kind: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    offset: int,
) -> tuple[list[asyncpg.Record], int]:
    """A farm's history entries matching the filters, newest first, and their total."""
    condition = """
        farm_id = $1 AND ($2::text IS NULL OR kind = $2)
        AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at < $4)
    """
    filters = (farm_id, kind, since, until)
    total: int = await conn.fetchval(
        f"SELECT count(*) FROM climate_history WHERE {condition}", *filters
    )
    rows = await conn.fetch(
        "SELECT id, farm_id, row_id, settings_id, kind, at, actor_id, actor_email, data"
        f" FROM climate_history WHERE {condition}"
        " ORDER BY at DESC, received DESC LIMIT $5 OFFSET $6",
        *filters,
        limit,
        offset,
    )
    return list(rows), total
