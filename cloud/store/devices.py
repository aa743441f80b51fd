"""Devices of the mirror, on a user-path connection: row-level security picks the farms."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.farms import like_pattern
from cloud.store.records import plain

__all__ = ["list_devices"]

_COLUMNS = """
    id, farm_id, name, kind, device_type, location, status, admin_status,
    firmware_profile AS profile, address, mac_address, firmware_version, battery_level,
    calibration_data, state, max_speed, rated_power_w, last_reading, last_seen,
    created_at, updated_at
"""


_ORDER = {
    "name": "name, id",
    "-name": "name DESC, id",
    "kind": "kind, name, id",
    "location": "lower(location), name, id",
    "status": "status, name, id",
    "last_seen": "last_seen NULLS FIRST, name, id",
    "-last_seen": "last_seen DESC NULLS LAST, name, id",
}
"""ORDER BY of each sort a device list offers (after the farm), as the agent orders."""


async def list_devices(
    conn: Connection,
    *,
    farm_id: UUID | None,
    kind: str | None,
    device_type: str | None,
    status: str | None,
    limit: int,
    offset: int,
    location: str | None = None,
    search: str | None = None,
    sort: str = "name",
) -> tuple[list[dict[str, Any]], int]:
    """Visible devices matching every filter given, by farm then ``sort``, and the total."""
    condition = """
        ($1::uuid IS NULL OR farm_id = $1) AND ($2::text IS NULL OR kind = $2)
        AND ($3::text IS NULL OR device_type = $3) AND ($4::text IS NULL OR status = $4)
        AND ($5::text IS NULL OR lower(location) = lower($5))
        AND ($6::text IS NULL OR name ILIKE $6 OR location ILIKE $6 OR device_type ILIKE $6)
    """
    filters = (
        farm_id,
        kind,
        device_type,
        status,
        None if location is None else location.strip(),
        like_pattern(search.strip()) if search else None,
    )
    total: int = await conn.fetchval(f"SELECT count(*) FROM devices WHERE {condition}", *filters)
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM devices WHERE {condition}"
        f" ORDER BY farm_id, {_ORDER[sort]} LIMIT $7 OFFSET $8",
        *filters,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total
