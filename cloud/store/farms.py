"""Farms and their hierarchy (rows, racks, shelves) in the cloud mirror.

Every function runs on a user-path connection (`Database.as_user`): row-level security decides
which farms and which rows exist for the caller, so no query here filters by user.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.records import plain

__all__ = [
    "farm",
    "farm_devices",
    "farm_rows",
    "like_pattern",
    "list_farms",
    "list_racks",
    "list_rows",
    "list_shelves",
    "rack_farm",
    "row_farm",
]

_FARM_COLUMNS = "f.id, f.name, f.description, f.location, f.status, f.created_at, f.updated_at"


def like_pattern(text: str) -> str:
    """An ILIKE pattern matching ``text`` anywhere, its wildcards escaped (ESCAPE '\\')."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def list_farms(
    conn: Connection, search: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """Visible farms, newest first, with their metrics, and the total before paging."""
    pattern = like_pattern(search) if search else None
    condition = "($1::text IS NULL OR f.name ILIKE $1 ESCAPE '\\')"
    total: int = await conn.fetchval(f"SELECT count(*) FROM farms AS f WHERE {condition}", pattern)
    rows = await conn.fetch(
        f"""
        SELECT {_FARM_COLUMNS},
            (SELECT count(*) FROM rows AS r WHERE r.farm_id = f.id) AS total_rows,
            (SELECT count(*) FROM racks AS k WHERE k.farm_id = f.id) AS total_racks,
            (SELECT count(*) FROM shelves AS s WHERE s.farm_id = f.id) AS total_shelves,
            (SELECT coalesce(sum(s.current_plant_count), 0) FROM shelves AS s
                WHERE s.farm_id = f.id AND s.status = 'active') AS active_plants
        FROM farms AS f
        WHERE {condition}
        ORDER BY f.created_at DESC, f.id
        LIMIT $2 OFFSET $3
        """,
        pattern,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total


async def farm(conn: Connection, farm_id: UUID) -> dict[str, Any] | None:
    """One visible farm."""
    row = await conn.fetchrow(f"SELECT {_FARM_COLUMNS} FROM farms AS f WHERE f.id = $1", farm_id)
    return plain(row) if row is not None else None


async def farm_rows(conn: Connection, farm_id: UUID) -> list[dict[str, Any]]:
    """Summaries of a farm's rows, by position."""
    rows = await conn.fetch(
        "SELECT id, name, position, status FROM rows WHERE farm_id = $1"
        " ORDER BY position, name, id",
        farm_id,
    )
    return [plain(row) for row in rows]


async def farm_devices(conn: Connection, farm_id: UUID) -> list[dict[str, Any]]:
    """Summaries of a farm's devices, by name."""
    rows = await conn.fetch(
        "SELECT id, name, device_type AS type, status FROM devices WHERE farm_id = $1"
        " ORDER BY name, id",
        farm_id,
    )
    return [plain(row) for row in rows]


async def row_farm(conn: Connection, row_id: UUID) -> UUID | None:
    """The farm of a visible row."""
    farm_id: UUID | None = await conn.fetchval("SELECT farm_id FROM rows WHERE id = $1", row_id)
    return farm_id


async def rack_farm(conn: Connection, rack_id: UUID) -> UUID | None:
    """The farm of a visible rack."""
    farm_id: UUID | None = await conn.fetchval("SELECT farm_id FROM racks WHERE id = $1", rack_id)
    return farm_id


async def list_rows(
    conn: Connection, farm_id: UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A farm's rows by position, with the racks, shelves and plant capacity below each."""
    total: int = await conn.fetchval("SELECT count(*) FROM rows WHERE farm_id = $1", farm_id)
    rows = await conn.fetch(
        """
        SELECT r.id, r.farm_id, r.name, r.position, r.status,
            (SELECT count(*) FROM racks AS k WHERE k.row_id = r.id) AS rack_count,
            (SELECT count(*) FROM shelves AS s JOIN racks AS k ON k.id = s.rack_id
                WHERE k.row_id = r.id) AS shelf_count,
            (SELECT coalesce(sum(s.plant_capacity), 0) FROM shelves AS s
                JOIN racks AS k ON k.id = s.rack_id WHERE k.row_id = r.id) AS plant_capacity
        FROM rows AS r
        WHERE r.farm_id = $1
        ORDER BY r.position, r.name, r.id
        LIMIT $2 OFFSET $3
        """,
        farm_id,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total


async def list_racks(
    conn: Connection, row_id: UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A row's racks by position."""
    total: int = await conn.fetchval("SELECT count(*) FROM racks WHERE row_id = $1", row_id)
    rows = await conn.fetch(
        "SELECT id, row_id, name, position, height_cm, width_cm, depth_cm, status FROM racks"
        " WHERE row_id = $1 ORDER BY position, name, id LIMIT $2 OFFSET $3",
        row_id,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total


async def list_shelves(
    conn: Connection, rack_id: UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A rack's shelves by level."""
    total: int = await conn.fetchval("SELECT count(*) FROM shelves WHERE rack_id = $1", rack_id)
    rows = await conn.fetch(
        "SELECT id, rack_id, name, level, plant_capacity, current_species, current_plant_count,"
        " status, created_at FROM shelves"
        " WHERE rack_id = $1 ORDER BY level, name, id LIMIT $2 OFFSET $3",
        rack_id,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total
