"""Rate-limit counters shared by every cloud process (0050_shared_state.sql), system path."""

from __future__ import annotations

from cloud.store.db import Connection

__all__ = ["count_hit", "prune_windows"]


async def count_hit(conn: Connection, key: str, window_start: int) -> int:
    """Add one request to ``key``'s window and answer the window's count, this one included.

    One statement: concurrent hits from any process serialize on the row, none is lost."""
    count: int = await conn.fetchval(
        "INSERT INTO rate_counters AS c (key, window_start, count) VALUES ($1, $2, 1)"
        " ON CONFLICT (key, window_start) DO UPDATE SET count = c.count + 1"
        " RETURNING c.count",
        key,
        window_start,
    )
    return count


async def prune_windows(conn: Connection, ended_before: int) -> int:
    """Forget windows that ended before ``ended_before`` (epoch seconds); how many went."""
    status: str = await conn.execute(
        "DELETE FROM rate_counters WHERE window_start < $1", ended_before
    )
    return int(status.split()[-1])
