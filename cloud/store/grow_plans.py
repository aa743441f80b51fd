"""Grow plans of the mirror, on a user-path connection: row-level security picks the farms."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["farm_zone", "get_plan", "list_plans", "reading_counts", "slot_sums"]

_COLUMNS = """
    id, farm_id, name, species, status, started_at, expected_harvest_at, stages, notes,
    created_by, created_at, updated_at, shelves, plant_count, ended_at
"""


async def list_plans(
    conn: Connection,
    *,
    farm_id: UUID | None,
    shelf_id: UUID | None,
    status: str | None,
    limit: int,
    offset: int,
) -> tuple[list[asyncpg.Record], int]:
    """Visible plans matching every filter given, newest first, and the total."""
    condition = """
        ($1::uuid IS NULL OR farm_id = $1)
        AND ($2::uuid IS NULL
             OR shelves @> jsonb_build_array(jsonb_build_object('shelf_id', $2::text)))
        AND ($3::text IS NULL OR status = $3)
    """
    filters = (farm_id, shelf_id, status)
    total: int = await conn.fetchval(f"SELECT count(*) FROM grow_plans WHERE {condition}", *filters)
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM grow_plans WHERE {condition}"
        " ORDER BY created_at DESC, id LIMIT $4 OFFSET $5",
        *filters,
        limit,
        offset,
    )
    return list(rows), total


async def get_plan(conn: Connection, plan_id: UUID) -> asyncpg.Record | None:
    """One visible plan, or None."""
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM grow_plans WHERE id = $1", plan_id)


async def farm_zone(conn: Connection, farm_id: UUID) -> str | None:
    """The time zone the farm's agent counts days in, if it synced one."""
    zone: str | None = await conn.fetchval(
        "SELECT s.value FROM agent_settings AS s JOIN farms AS f ON f.agent_id = s.agent_id"
        " WHERE f.id = $1 AND s.key = 'timezone'",
        farm_id,
    )
    return zone


_RANGE = "farm_id = $1 AND metric = $2 AND ts >= to_timestamp($3 / 1000.0)" \
    " AND ts < to_timestamp($4 / 1000.0)"  # fmt: skip


async def reading_counts(
    conn: Connection, farm_id: UUID, metric: str, start_ms: int, end_ms: int
) -> list[tuple[int, int, int]]:
    """Per device of the farm reporting ``metric`` in ``[start, end)``: its readings, and the
    minutes and hours that hold any (what its 1-minute and 1-hour rollups would count)."""
    rows = await conn.fetch(
        "SELECT count(*) AS raw,"
        " count(DISTINCT floor(extract(epoch FROM ts) / 60)) AS minutes,"
        " count(DISTINCT floor(extract(epoch FROM ts) / 3600)) AS hours"
        f" FROM readings WHERE {_RANGE} GROUP BY device_id",
        farm_id,
        metric,
        start_ms,
        end_ms,
    )
    return [(int(r["raw"]), int(r["minutes"]), int(r["hours"])) for r in rows]


async def slot_sums(
    conn: Connection, farm_id: UUID, metric: str, start_ms: int, end_ms: int, slot_ms: int
) -> dict[int, tuple[float, int]]:
    """The farm's readings of ``metric`` in ``[start, end)`` summed per epoch-aligned slot."""
    rows = await conn.fetch(
        "SELECT (floor(extract(epoch FROM ts) * 1000 / $5) * $5)::bigint AS slot,"
        " sum(value) AS total, count(*) AS n"
        f" FROM readings WHERE {_RANGE} GROUP BY slot",
        farm_id,
        metric,
        start_ms,
        end_ms,
        slot_ms,
    )
    return {int(r["slot"]): (float(r["total"]), int(r["n"])) for r in rows}
