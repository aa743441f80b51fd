"""Aggregates of many series over a time window, and their latest readings (farm metrics).

Whole hours come from the hourly rollups and the partial hours at either end from the 1-minute
rollups: ``readings_1h`` and ``readings_1m``, keyed by time bucket first (the window's buckets
are listed, each sought with every chosen series), and the series-ordered tables from before
migration 0117; staged readings from the stage. A series' latest reading is its row of
``readings_latest`` (kept by the trigger of ``readings``), or a newer staged one: never a search
through the buckets, which for a series that stopped a month ago would walk a month of them.
See ``agent/store/readings.py`` for the layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.store.access import visible_farm_filter
from agent.store.db import Database
from agent.store.readings import HOUR_MS, MINUTE_MS, bucket_of, floor_to
from protocol.identity import Principal

__all__ = ["ReadingWindows", "SeriesWindow"]


@dataclass(frozen=True, slots=True)
class SeriesWindow:
    """A series' aggregates over a window (None when it has no data there) and latest reading."""

    device_id: str
    metric: str
    unit: str
    min: float | None
    max: float | None
    sum: float | None
    count: int
    latest_ts: int | None
    latest_value: float | None


class ReadingWindows:
    """Reads window aggregates across series, selected by farm visibility or by device."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def of_farms(
        self, principal: Principal, farm_id: str | None, start: int, end: int
    ) -> list[SeriesWindow]:
        """Every series of the devices of one farm, or of every farm the caller may see."""
        condition, params = visible_farm_filter(principal, "d.farm_id")
        if farm_id is not None:
            condition += " AND d.farm_id = ?"
            params.append(farm_id)
        return await self._windows(
            f"s.device_id IN (SELECT d.id FROM devices d WHERE {condition})", params, start, end
        )

    async def of_devices(
        self, device_ids: Sequence[str], start: int, end: int
    ) -> list[SeriesWindow]:
        """Every series of the given devices (the caller has authorized them)."""
        if not device_ids:
            return []
        marks = ", ".join("?" * len(device_ids))
        return await self._windows(f"s.device_id IN ({marks})", list(device_ids), start, end)

    async def _windows(
        self, condition: str, params: list[Any], start: int, end: int
    ) -> list[SeriesWindow]:
        # Whole hours come from the hourly rollup and the partial hours at either end from the
        # minute rollup: exact to the minute, at a few rows per hour.
        low = floor_to(start, MINUTE_MS)
        first_hour = floor_to(low + HOUR_MS - 1, HOUR_MS)
        last_hour = floor_to(end, HOUR_MS)
        if first_hour >= last_hour:  # no whole hour inside: minutes only
            first_hour = last_hour = end
        minutes = (low, first_hour, last_hour, end)
        rows = await self._db.fetch_all(
            f"""
            WITH chosen AS (
                SELECT s.id, s.device_id, s.metric, s.unit FROM series s WHERE {condition}
            ),
            parts AS (
                SELECT series_id, vmin, vmax, vsum, n FROM readings_1h
                WHERE bucket IN (SELECT bucket FROM readings_1h_buckets
                        WHERE bucket BETWEEN ? AND ?)
                    AND series_id IN (SELECT id FROM chosen) AND ts >= ? AND ts < ?
                UNION ALL
                SELECT series_id, vmin, vmax, vsum, n FROM readings_1h_by_series
                WHERE series_id IN (SELECT id FROM chosen) AND ts >= ? AND ts < ?
                UNION ALL
                SELECT series_id, vmin, vmax, vsum, n FROM readings_1m
                WHERE bucket IN (SELECT bucket FROM readings_1m_buckets
                        WHERE bucket BETWEEN ? AND ? OR bucket BETWEEN ? AND ?)
                    AND series_id IN (SELECT id FROM chosen)
                    AND ((ts >= ? AND ts < ?) OR (ts >= ? AND ts < ?))
                UNION ALL
                SELECT series_id, vmin, vmax, vsum, n FROM readings_1m_by_series
                WHERE series_id IN (SELECT id FROM chosen)
                    AND ((ts >= ? AND ts < ?) OR (ts >= ? AND ts < ?))
                UNION ALL
                SELECT series_id, value, value, value, 1 FROM readings_staged
                WHERE series_id IN (SELECT id FROM chosen) AND ts >= ? AND ts < ?
            ),
            -- The newest staged reading of each series (max() picks its row's value).
            staged AS (
                SELECT series_id, max(ts) AS ts, value FROM readings_staged
                WHERE series_id IN (SELECT id FROM chosen) GROUP BY series_id
            ),
            folded AS (
                SELECT c.*, l.ts AS last_ts, l.value AS last_value
                FROM chosen c LEFT JOIN readings_latest l ON l.series_id = c.id
            )
            SELECT c.device_id, c.metric, c.unit,
                min(p.vmin), max(p.vmax), sum(p.vsum), coalesce(sum(p.n), 0),
                CASE WHEN st.ts > coalesce(c.last_ts, -1) THEN st.ts ELSE c.last_ts END,
                CASE WHEN st.ts > coalesce(c.last_ts, -1) THEN st.value ELSE c.last_value END
            FROM folded c LEFT JOIN parts p ON p.series_id = c.id
                LEFT JOIN staged st ON st.series_id = c.id
            GROUP BY c.id
            ORDER BY c.metric, c.device_id
            """,
            [
                *params,
                *_buckets(first_hour, last_hour),
                first_hour,
                last_hour,
                first_hour,
                last_hour,
                *_buckets(low, first_hour),
                *_buckets(last_hour, end),
                *minutes,
                *minutes,
                low,
                end,
            ],
        )
        return [SeriesWindow(*row) for row in rows]

    async def latest_of_devices(self, device_ids: Sequence[str]) -> dict[str, int]:
        """Timestamp of each device's newest stored raw reading (devices without any omitted)."""
        if not device_ids:
            return {}
        marks = ", ".join("?" * len(device_ids))
        rows = await self._db.fetch_all(
            f"""
            SELECT device_id, max(ts) FROM (
                SELECT s.device_id, l.ts FROM series s
                JOIN readings_latest l ON l.series_id = s.id WHERE s.device_id IN ({marks})
                UNION ALL
                SELECT s.device_id, st.ts FROM readings_staged st
                JOIN series s ON s.id = st.series_id WHERE s.device_id IN ({marks})
            )
            GROUP BY device_id
            """,
            [*device_ids, *device_ids],
        )
        return {device: int(ts) for device, ts in rows if ts is not None}


def _buckets(start: int, end: int) -> tuple[int, int]:
    """The first and last time bucket of ``[start, end)`` (an empty range: none)."""
    return (bucket_of(start), bucket_of(end - 1)) if end > start else (1, 0)
