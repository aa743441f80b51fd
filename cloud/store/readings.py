"""Readings of the mirror: raw values and their 1-minute and 1-hour rollups (min, max, mean,
count), read on a user-path connection so row-level security picks the farms.

An agent sends every reading once, raw or folded into one rollup (it replaces old raw readings
by 1-minute rollups, and those by 1-hour rollups, when its outbox is full, docs/design.md 8), so the
parts are disjoint: raw points are the raw readings plus the stored 1-minute rollups. Minutes and
hours come from ``reading_rollups``, which holds every reading received in whatever form, so a
range reads the same whichever form the sync used.

A sensor's series are read in one statement, ``sensor_series`` (0098_sensor_series.sql): the
queries and the points' rendering as JSON are there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

from cloud.store.db import Connection
from protocol.schemas.sensors import Resolution

__all__ = ["BucketSize", "SensorSeries", "Series", "sensor_series"]

BucketSize = Literal["1m", "1h"]


@dataclass(frozen=True)
class Series:
    """One metric's series, its points a JSON array of ``ReadingPoint`` objects."""

    metric: str
    unit: str
    points_json: str


@dataclass(frozen=True)
class SensorSeries:
    """A visible sensor's farm, whether the caller may write it (``None``: the farm is not
    visible), the resolution chosen and the series at it."""

    farm_id: UUID
    writable: bool | None
    resolution: Resolution
    series: tuple[Series, ...]


async def sensor_series(
    conn: Connection,
    user_id: UUID,
    sensor_id: UUID,
    metric: str | None,
    start: datetime,
    end: datetime,
    *,
    budget: int,
    raw_kept: bool,
    minutes_fit: bool,
    minute_start: datetime,
    hour_start: datetime,
) -> SensorSeries | None:
    """``metric`` (or every metric) of the sensor over [start, end) as ``user_id`` may see it,
    at the finest of raw (when ``raw_kept`` and every metric's raw points fit ``budget``),
    minutes (when ``minutes_fit``) and hours; ``None`` when the sensor is not visible.

    ``conn`` acts for nobody (``Database.statements_for_user``): the statement names the user.
    Buckets start at ``minute_start`` or ``hour_start``, the range's start rounded down."""
    rows = await conn.fetch(
        "SELECT farm_id, writable, resolution, metric, unit, points"
        " FROM sensor_series($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        user_id,
        sensor_id,
        metric,
        start,
        end,
        budget,
        raw_kept,
        minutes_fit,
        minute_start,
        hour_start,
    )
    if not rows:
        return None
    first = rows[0]
    return SensorSeries(
        farm_id=first["farm_id"],
        writable=first["writable"],
        resolution=first["resolution"],
        series=tuple(
            Series(r["metric"], r["unit"], r["points"]) for r in rows if r["metric"] is not None
        ),
    )
