"""Monthly partitions of ``readings`` (0055_readings_partitioned.sql), system path: made ahead of
time, and dropped whole by retention. The work runs in SECURITY DEFINER functions of the schema
owner; the system role only calls them."""

from __future__ import annotations

from datetime import datetime

from cloud.store.db import Connection

__all__ = ["drop_partitions_before", "ensure_partitions", "partitions"]


async def ensure_partitions(conn: Connection, months_ahead: int) -> int:
    """Make the partitions of this month and the next ``months_ahead`` that are missing; how
    many were made. Readings of such a month waiting in the default partition move in."""
    made: int = await conn.fetchval("SELECT readings_ensure_partitions($1)", months_ahead)
    return made


async def drop_partitions_before(conn: Connection, cutoff: datetime) -> int:
    """Drop every partition whose month ends by ``cutoff`` (and older strays of the default
    partition); how many partitions went. Their rollups stay."""
    dropped: int = await conn.fetchval("SELECT readings_drop_partitions_before($1)", cutoff)
    return dropped


async def partitions(conn: Connection) -> list[str]:
    """The names of the partitions of ``readings``, in name (month) order."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'readings'::regclass ORDER BY c.relname"
    )
    return [r["relname"] for r in rows]
