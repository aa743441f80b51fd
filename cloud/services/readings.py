"""Sensor readings over a range at a resolution chosen for a point budget (docs/design.md 6).

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

from cloud.services.retention import RetentionPolicy
from cloud.store import readings as store
from cloud.store.db import Database
from protocol.access import Action, authorize
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import PermissionType, Principal
from protocol.schemas.sensors import Resolution, SensorDataQuery
from protocol.timefmt import iso, utcnow

__all__ = [
    "DEFAULT_SPAN",
    "MAX_HOURLY_POINTS",
    "ReadingService",
    "RenderedSensorData",
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
class RenderedSensorData:
    """A ``SensorData`` answer whose points PostgreSQL rendered: a year of hours is 8,760
    points, and building, validating and serializing them as models was most of the request's
    time. The points come from the database as the API writes them, so nothing is left to
    check."""

    sensor_id: str
    start: str
    end: str
    resolution: Resolution
    series: tuple[store.Series, ...]
    """Each metric's points already a JSON array (``ReadingPoint`` objects)."""

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
        """One metric, or every metric, of a sensor over the range.

        One statement (``store.sensor_series``): while batches keep the process busy, each
        round trip waits for its event loop again, and the read used to take eight."""
        end = query.end or self._clock()
        start = query.start or end - DEFAULT_SPAN
        if start >= end:
            raise ValidationFailed.of([("query.start", "start must be before end")])
        if bucket_count(start, end, 3600) > MAX_HOURLY_POINTS:
            raise ValidationFailed.of(
                [("query.start", f"the range may span at most {MAX_HOURLY_POINTS} hours")]
            )
        # Raw readings past the retention may be gone (their rollups stay): no raw answer.
        raw_since = self._retention.raw_since(self._clock())
        async with self._db.statements_for_user() as conn:
            found = await store.sensor_series(
                conn,
                UUID(principal.user_id),
                UUID(sensor_id),
                query.metric,
                start,
                end,
                budget=query.max_points,
                raw_kept=raw_since is None or start >= raw_since,
                minutes_fit=bucket_count(start, end, _BUCKET_SECONDS["1m"]) <= query.max_points,
                minute_start=align(start, _BUCKET_SECONDS["1m"]),
                hour_start=align(start, _BUCKET_SECONDS["1h"]),
            )
        if found is None:
            raise NotFound("Sensor not found")
        grant = None
        if found.writable is not None:
            grant = PermissionType.READ_WRITE if found.writable else PermissionType.READ_ONLY
        authorize(principal, Action.READ, grant)
        return RenderedSensorData(
            sensor_id=sensor_id,
            start=iso(start),
            end=iso(end),
            resolution=found.resolution,
            series=found.series,
        )
