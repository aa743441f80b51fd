"""Grow plans of the mirror, on a user-path connection: row-level security picks the farms."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["list_plans"]

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
