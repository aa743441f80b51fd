"""What the farm overview reads from the mirror, on a user-path connection (RLS picks the farms):
the layout, the devices and each sensor's latest reading per metric."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.records import plain

__all__ = ["device_facts", "latest_values", "shelf_layout"]


async def shelf_layout(conn: Connection, farm_id: UUID) -> list[dict[str, Any]]:
    """Every shelf of a farm with its rack and row, by row, rack and level."""
    rows = await conn.fetch(
        """
        SELECT r.id AS row_id, r.name AS row_name, r.position AS row_position,
            k.id AS rack_id, k.name AS rack_name, k.position AS rack_position,
            s.id AS shelf_id, s.name AS shelf_name, s.level, s.current_species,
            s.current_plant_count
        FROM shelves AS s JOIN racks AS k ON k.id = s.rack_id JOIN rows AS r ON r.id = k.row_id
        WHERE s.farm_id = $1
        ORDER BY r.position, k.position, s.level DESC
        """,
        farm_id,
    )
    return [plain(row) for row in rows]


async def device_facts(conn: Connection, farm_id: UUID) -> list[dict[str, Any]]:
    """Id, name, kind, location, status and last times of every device of a farm, by name."""
    rows = await conn.fetch(
        "SELECT id, name, kind, location, status, last_seen, last_reading FROM devices"
        " WHERE farm_id = $1 ORDER BY name, id",
        farm_id,
    )
    return [plain(row) for row in rows]


async def latest_values(conn: Connection, farm_id: UUID, since: datetime) -> list[dict[str, Any]]:
    """Each (sensor, metric)'s newest raw reading since ``since``."""
    rows = await conn.fetch(
        """
        SELECT DISTINCT ON (device_id, metric) device_id, metric, unit, value
        FROM readings WHERE farm_id = $1 AND ts >= $2
        ORDER BY device_id, metric, ts DESC
        """,
        farm_id,
        since,
    )
    return [plain(row) for row in rows]
