"""Readings of the mirror: raw values and their 1-minute and 1-hour rollups (min, max, mean,
count), read on a user-path connection so row-level security picks the farms.

An agent sends every reading once, raw or folded into one rollup (it replaces old raw readings
by 1-minute rollups, and those by 1-hour rollups, when its outbox is full, DESIGN.md 8), so the
parts are disjoint: a minute is its stored 1-minute rollups plus its raw readings, an hour its
stored 1-hour rollups plus its minutes. A range reads the same whichever form the sync used.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.records import plain

__all__ = ["BucketSize", "bucket_points", "capped_count", "metrics_of", "raw_points", "unit_of"]

BucketSize = Literal["1m", "1h"]
# Buckets are aligned on whole minutes and hours of UTC (date_bin needs an origin).
_ORIGIN = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"

# Per-minute figures, `total` = sum of values. An agent sends each reading once, either raw or
# inside one rollup, so a minute's stored rollups and its raw readings are disjoint parts of it
# and add up (a minute may be part raw, part rollup). Parameters: $1 device, $2 metric, $3
# start, $4 end.
_MINUTES = f"""
    minute_parts AS (
        SELECT bucket, min, max, mean * count AS total, count::bigint AS count FROM rollups
        WHERE device_id = $1 AND metric = $2 AND resolution = '1m'
          AND bucket >= $3 AND bucket < $4
        UNION ALL
        SELECT date_bin('1 minute', ts, {_ORIGIN}), min(value), max(value), sum(value), count(*)
        FROM readings
        WHERE device_id = $1 AND metric = $2 AND ts >= $3 AND ts < $4
        GROUP BY 1
    ),
    minutes AS (
        SELECT bucket, min(min) AS min, max(max) AS max, sum(total) AS total,
               sum(count)::bigint AS count
        FROM minute_parts GROUP BY bucket
    )
"""

_MINUTE_POINTS = f"""
    WITH {_MINUTES}
    SELECT bucket AS timestamp, total / count AS value, min, max, count
    FROM minutes ORDER BY bucket
"""

# An hour adds its stored 1-hour rollups (what an agent sends when even 1-minute rollups no
# longer fit its outbox) to its minutes.
_HOUR_POINTS = f"""
    WITH {_MINUTES},
    hour_parts AS (
        SELECT bucket, min, max, mean * count AS total, count::bigint AS count FROM rollups
        WHERE device_id = $1 AND metric = $2 AND resolution = '1h'
          AND bucket >= $3 AND bucket < $4
        UNION ALL
        SELECT date_bin('1 hour', bucket, {_ORIGIN}), min(min), max(max), sum(total),
            sum(count)::bigint
        FROM minutes
        GROUP BY 1
    ),
    hours AS (
        SELECT bucket, min(min) AS min, max(max) AS max, sum(total) AS total,
               sum(count)::bigint AS count
        FROM hour_parts GROUP BY bucket
    )
    SELECT bucket AS timestamp, total / count AS value, min, max, count
    FROM hours ORDER BY bucket
"""

# Raw readings, and the stored 1-minute rollups that stand for the readings not sent raw.
_RAW_POINTS = """
    SELECT ts AS timestamp, value, value AS min, value AS max, 1::bigint AS count
    FROM readings WHERE device_id = $1 AND metric = $2 AND ts >= $3 AND ts < $4
    UNION ALL
    SELECT m.bucket, m.mean, m.min, m.max, m.count::bigint FROM rollups AS m
    WHERE m.device_id = $1 AND m.metric = $2 AND m.resolution = '1m'
      AND m.bucket >= $3 AND m.bucket < $4
    ORDER BY 1
"""


async def metrics_of(conn: Connection, device_id: UUID) -> list[str]:
    """Every metric the device has readings or rollups of, in name order.

    A loose index scan (one index probe per distinct metric) over the primary keys, which start
    with (device_id, metric), instead of reading every row of the device.
    """
    rows = await conn.fetch(
        """
        WITH RECURSIVE raw_metrics (metric) AS (
            (SELECT metric FROM readings WHERE device_id = $1 ORDER BY metric LIMIT 1)
            UNION ALL
            SELECT (SELECT r.metric FROM readings AS r
                    WHERE r.device_id = $1 AND r.metric > m.metric ORDER BY r.metric LIMIT 1)
            FROM raw_metrics AS m WHERE m.metric IS NOT NULL
        ),
        rollup_metrics (metric) AS (
            (SELECT metric FROM rollups WHERE device_id = $1 ORDER BY metric LIMIT 1)
            UNION ALL
            SELECT (SELECT r.metric FROM rollups AS r
                    WHERE r.device_id = $1 AND r.metric > m.metric ORDER BY r.metric LIMIT 1)
            FROM rollup_metrics AS m WHERE m.metric IS NOT NULL
        )
        SELECT metric FROM raw_metrics WHERE metric IS NOT NULL
        UNION
        SELECT metric FROM rollup_metrics WHERE metric IS NOT NULL
        ORDER BY metric
        """,
        device_id,
    )
    return [row["metric"] for row in rows]


async def unit_of(conn: Connection, device_id: UUID, metric: str) -> str:
    """The unit of the metric's newest reading or rollup ('' when there is none)."""
    unit: str = await conn.fetchval(
        """
        SELECT coalesce(
            (SELECT unit FROM readings WHERE device_id = $1 AND metric = $2
             ORDER BY ts DESC LIMIT 1),
            (SELECT unit FROM rollups WHERE device_id = $1 AND metric = $2
             ORDER BY bucket DESC LIMIT 1),
            '')
        """,
        device_id,
        metric,
    )
    return unit


async def capped_count(
    conn: Connection, device_id: UUID, metric: str, start: datetime, end: datetime, cap: int
) -> int:
    """Raw readings plus stored 1-minute rollups in [start, end), counting each to at most
    ``cap``: enough to tell whether raw points fit a budget without counting a year of them."""
    count: int = await conn.fetchval(
        """
        SELECT
            (SELECT count(*) FROM (SELECT 1 FROM readings
                WHERE device_id = $1 AND metric = $2 AND ts >= $3 AND ts < $4 LIMIT $5) AS r)
          + (SELECT count(*) FROM (SELECT 1 FROM rollups
                WHERE device_id = $1 AND metric = $2 AND resolution = '1m'
                  AND bucket >= $3 AND bucket < $4 LIMIT $5) AS m)
        """,
        device_id,
        metric,
        start,
        end,
        cap,
    )
    return count


async def raw_points(
    conn: Connection, device_id: UUID, metric: str, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """Raw readings in [start, end), oldest first (min = max = value, count 1)."""
    rows = await conn.fetch(_RAW_POINTS, device_id, metric, start, end)
    return [plain(row) for row in rows]


async def bucket_points(
    conn: Connection,
    device_id: UUID,
    metric: str,
    start: datetime,
    end: datetime,
    size: BucketSize,
) -> list[dict[str, Any]]:
    """Buckets of ``size`` starting in [start, end), oldest first; ``start`` must be aligned."""
    sql = _MINUTE_POINTS if size == "1m" else _HOUR_POINTS
    rows = await conn.fetch(sql, device_id, metric, start, end)
    return [plain(row) for row in rows]
