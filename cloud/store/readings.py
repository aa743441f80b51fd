"""Readings of the mirror: raw values and their 1-minute and 1-hour rollups (min, max, mean,
count), read on a user-path connection so row-level security picks the farms.

An agent sends every reading once, raw or folded into one rollup (it replaces old raw readings
by 1-minute rollups, and those by 1-hour rollups, when its outbox is full, DESIGN.md 8), so the
parts are disjoint: raw points are the raw readings plus the stored 1-minute rollups. Minutes and
hours come from ``reading_rollups``, which holds every reading received in whatever form, so a
range reads the same whichever form the sync used.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args
from uuid import UUID

from cloud.store.db import Connection

__all__ = ["BucketSize", "bucket_points", "capped_count", "metrics_of", "raw_points", "unit_of"]

BucketSize = Literal["1m", "1h"]
# Buckets of every reading received, whichever form it came in (raw or the agent's rollups):
# kept by triggers as batches are applied (0055_readings_partitioned.sql), so a year of hours is
# 8,760 rows of one index range, however many raw readings it holds or held. The resolution is
# written into each statement rather than passed: hours are read from their own covering index
# (0097_reading_rollups_hours_covering.sql), partial on resolution = '1h', which a prepared
# statement's generic plan may use only when the resolution is part of its text. Parameters: $1
# device, $2 metric, $3 start, $4 end.
_BUCKET_POINTS = {
    size: f"""
    SELECT bucket AS at, total / count AS value, min, max, count
    FROM reading_rollups
    WHERE device_id = $1 AND metric = $2 AND resolution = '{size}' AND bucket >= $3
      AND bucket < $4
"""
    for size in get_args(BucketSize)
}

# Raw readings, and the stored 1-minute rollups that stand for the readings not sent raw.
_RAW_POINTS = """
    SELECT ts AS at, value, value AS min, value AS max, 1::bigint AS count
    FROM readings WHERE device_id = $1 AND metric = $2 AND ts >= $3 AND ts < $4
    UNION ALL
    SELECT m.bucket, m.mean, m.min, m.max, m.count::bigint FROM rollups AS m
    WHERE m.device_id = $1 AND m.metric = $2 AND m.resolution = '1m'
      AND m.bucket >= $3 AND m.bucket < $4
"""

# Points as the API writes them (ReadingPoint, timestamps as in DESIGN.md section 3), oldest
# first, rendered as one JSON array by PostgreSQL: a year of hours is 8,760 points, and making,
# validating and serializing them one by one in Python was most of the request's time. Text
# concatenation renders them in half the time json_build_object takes; a float8 as text is its
# shortest exact form (extra_float_digits > 0, the default), as in JSON, and the values are
# finite (readings arrive as scaled integers, protocol/sync.py).
_POINTS_JSON = """
    SELECT '[' || coalesce(string_agg(
               '{{"timestamp":"'
               || to_char(p.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
               || '","value":' || p.value || ',"min":' || p.min || ',"max":' || p.max
               || ',"count":' || p.count || '}}', ',' ORDER BY p.at), '') || ']'
    FROM ({points}) AS p
"""


async def metrics_of(conn: Connection, device_id: UUID) -> list[str]:
    """Every metric the device has readings or rollups of, in name order.

    A loose index scan (one index probe per distinct metric) over ``reading_rollups``' key,
    which starts with (device_id, metric) and holds every metric received, instead of reading
    every row of the device.
    """
    rows = await conn.fetch(
        """
        WITH RECURSIVE metrics (metric) AS (
            (SELECT metric FROM reading_rollups WHERE device_id = $1 ORDER BY metric LIMIT 1)
            UNION ALL
            SELECT (SELECT r.metric FROM reading_rollups AS r
                    WHERE r.device_id = $1 AND r.metric > m.metric ORDER BY r.metric LIMIT 1)
            FROM metrics AS m WHERE m.metric IS NOT NULL
        )
        SELECT metric FROM metrics WHERE metric IS NOT NULL ORDER BY metric
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
            (SELECT unit FROM reading_rollups WHERE device_id = $1 AND metric = $2
             AND resolution = '1h' ORDER BY bucket DESC LIMIT 1),
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
) -> str:
    """Raw readings in [start, end), oldest first (min = max = value, count 1), as a JSON
    array of points."""
    points: str = await conn.fetchval(
        _POINTS_JSON.format(points=_RAW_POINTS), device_id, metric, start, end
    )
    return points


async def bucket_points(
    conn: Connection,
    device_id: UUID,
    metric: str,
    start: datetime,
    end: datetime,
    size: BucketSize,
) -> str:
    """Buckets of ``size`` starting in [start, end), oldest first, as a JSON array of points;
    ``start`` must be aligned."""
    points: str = await conn.fetchval(
        _POINTS_JSON.format(points=_BUCKET_POINTS[size]), device_id, metric, start, end
    )
    return points
