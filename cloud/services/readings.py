"""Sensor readings over a range at a resolution chosen for a point budget (DESIGN.md 6).

The finest resolution whose points fit ``max_points`` in every series wins: raw readings, then
1-minute, then 1-hour buckets. When even hourly buckets exceed the budget they are still what is
answered (the budget chooses a resolution, it does not drop data); the range is capped so that
a series never exceeds MAX_HOURLY_POINTS.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.services.retention import RetentionPolicy
from cloud.store import readings as store
from cloud.store.db import Connection, Database
from cloud.store.devices import sensor_farm
from protocol.access import Action
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.sensors import Resolution, SensorDataQuery
from protocol.timefmt import iso, utcnow

__all__ = [
    "DEFAULT_SPAN",
    "MAX_HOURLY_POINTS",
    "ReadingService",
    "RenderedSensorData",
    "RenderedSeries",
]

DEFAULT_SPAN = timedelta(hours=24)
MAX_HOURLY_POINTS = 10_000
"""About 416 days of hourly buckets: the longest range one request may ask for."""

_BUCKET_SECONDS: dict[store.BucketSize, int] = {"1m": 60, "1h": 3600}


def align(moment: datetime, seconds: int) -> datetime:
    """``moment`` rounded down to a whole bucket of ``seconds`` (UTC, from the Unix epoch)."""
    return datetime.fromtimestamp(
        math.floor(moment.timestamp() / seconds) * seconds, tz=moment.tzinfo
    )


def bucket_count(start: datetime, end: datetime, seconds: int) -> int:
    """How many buckets of ``seconds`` the range [start, end) touches."""
    return math.ceil((end - align(start, seconds)).total_seconds() / seconds)


@dataclass(frozen=True)
class RenderedSeries:
    """One metric's series, its points already a JSON array (``ReadingPoint`` objects)."""

    metric: str
    unit: str
    points_json: str


@dataclass(frozen=True)
class RenderedSensorData:
    """A ``SensorData`` answer whose points PostgreSQL rendered: a year of hours is 8,760
    points, and building, validating and serializing them as models was most of the request's
    time. The points come from the database as the API writes them, so nothing is left to
    check."""

    sensor_id: str
    start: str
    end: str
    resolution: Resolution
    series: tuple[RenderedSeries, ...]

    def json(self) -> bytes:
        """The answer as ``SensorData``'s JSON (same fields, same order)."""
        dump = json.dumps
        series = ",".join(
            f'{{"metric":{dump(s.metric)},"unit":{dump(s.unit)},"points":{s.points_json}}}'
            for s in self.series
        )
        return (
            f'{{"sensor_id":{dump(self.sensor_id)},"start":{dump(self.start)},'
            f'"end":{dump(self.end)},"resolution":{dump(self.resolution)},"series":[{series}]}}'
        ).encode()


class ReadingService:
    """Readings of the sensors the caller may see."""

    def __init__(
        self,
        db: Database,
        retention: RetentionPolicy | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = db
        self._retention = retention or RetentionPolicy()
        self._clock = clock

    async def sensor_data(
        self, principal: Principal, sensor_id: str, query: SensorDataQuery
    ) -> RenderedSensorData:
        """One metric, or every metric, of a sensor over the range."""
        end = query.end or self._clock()
        start = query.start or end - DEFAULT_SPAN
        if start >= end:
            raise ValidationFailed.of([("query.start", "start must be before end")])
        if bucket_count(start, end, 3600) > MAX_HOURLY_POINTS:
            raise ValidationFailed.of(
                [("query.start", f"the range may span at most {MAX_HOURLY_POINTS} hours")]
            )
        device_id = UUID(sensor_id)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            farm_id = await sensor_farm(conn, device_id)
            if farm_id is None:
                raise NotFound("Sensor not found")
            await authorize_farm(conn, principal, farm_id, Action.READ)
            metrics = [query.metric] if query.metric else await store.metrics_of(conn, device_id)
            # Raw readings past the retention may be gone (their rollups stay): no raw answer.
            raw_since = self._retention.raw_since(self._clock())
            raw_kept = raw_since is None or start >= raw_since
            resolution = await self._resolution(
                conn, device_id, metrics, start, end, query.max_points, raw_kept
            )
            series = []
            for metric in metrics:
                points = await self._points(conn, device_id, metric, start, end, resolution)
                unit = await store.unit_of(conn, device_id, metric)
                series.append(RenderedSeries(metric, unit, points))
        return RenderedSensorData(
            sensor_id=sensor_id,
            start=iso(start),
            end=iso(end),
            resolution=resolution,
            series=tuple(series),
        )

    @staticmethod
    async def _resolution(
        conn: Connection,
        device_id: UUID,
        metrics: list[str],
        start: datetime,
        end: datetime,
        budget: int,
        raw_kept: bool,
    ) -> Resolution:
        if raw_kept:
            for metric in metrics:
                if (
                    await store.capped_count(conn, device_id, metric, start, end, budget + 1)
                    > budget
                ):
                    break
            else:
                return "raw"
        if bucket_count(start, end, _BUCKET_SECONDS["1m"]) <= budget:
            return "1m"
        return "1h"

    @staticmethod
    async def _points(
        conn: Connection,
        device_id: UUID,
        metric: str,
        start: datetime,
        end: datetime,
        resolution: Resolution,
    ) -> str:
        if resolution == "raw":
            return await store.raw_points(conn, device_id, metric, start, end)
        seconds = _BUCKET_SECONDS[resolution]
        return await store.bucket_points(
            conn, device_id, metric, align(start, seconds), end, resolution
        )
