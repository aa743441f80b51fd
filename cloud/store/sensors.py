"""The sensors of the mirror and their readings' aggregates, on a user-path connection:
row-level security picks the farms."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.records import plain

__all__ = ["farm_sensors", "metric_aggregates"]


async def farm_sensors(
    conn: Connection, farm_id: UUID, device_type: str | None
) -> list[dict[str, Any]]:
    """Id and status of every visible sensor of a farm (of one device type, if given)."""
    rows = await conn.fetch(
        "SELECT id, status FROM devices WHERE farm_id = $1 AND kind = 'sensor'"
        " AND ($2::text IS NULL OR device_type = $2) ORDER BY id",
        farm_id,
        device_type,
    )
    return [plain(row) for row in rows]


async def metric_aggregates(
    conn: Connection, device_ids: list[UUID], start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """Per metric over the devices' raw readings in [start, end): how many sensors reported it,
    count, min, max, mean, and the unit of its newest reading; in metric order."""
    rows = await conn.fetch(
        """
        SELECT metric, count(DISTINCT device_id) AS sensor_count, count(*) AS count,
               min(value) AS min, max(value) AS max, avg(value) AS mean,
               (array_agg(unit ORDER BY ts DESC))[1] AS unit
        FROM readings
        WHERE device_id = ANY($1::uuid[]) AND ts >= $2 AND ts < $3
        GROUP BY metric ORDER BY metric
        """,
        device_ids,
        start,
        end,
    )
    return [plain(row) for row in rows]
