"""Figures about the whole mirror, for the connectivity check (system path: they span every
user's farms, and only counts leave this module)."""

from __future__ import annotations

from datetime import datetime

from cloud.store.db import Connection

__all__ = ["mirror_figures"]


async def mirror_figures(conn: Connection) -> tuple[int, datetime | None]:
    """Records of the farm hierarchy and devices, and the newest time an agent synced."""
    row = await conn.fetchrow(
        """
        SELECT (SELECT count(*) FROM farms) + (SELECT count(*) FROM rows)
             + (SELECT count(*) FROM racks) + (SELECT count(*) FROM shelves)
             + (SELECT count(*) FROM devices) AS items,
               (SELECT max(last_seen_at) FROM agents) AS last_sync
        """
    )
    assert row is not None  # a SELECT without FROM returns one row
    return int(row["items"]), row["last_sync"]
