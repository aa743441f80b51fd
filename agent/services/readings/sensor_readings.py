"""The readings query service as the sensor views want it (``sensors.ReadingsQuery``).

The sensor service authorizes the caller for the device or farm first, then asks here in
datetimes; this adapter converts to the store's unix milliseconds and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from agent.services.devices.sensors import Aggregate, Series, SeriesPoint
from agent.services.readings.query import ReadingQuery
from agent.services.readings.writer import to_ms
from agent.store.readings import Resolution

__all__ = ["SensorReadings"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAMES: dict[Resolution, Literal["raw", "1m", "1h"]] = {
    Resolution.RAW: "raw",
    Resolution.MINUTE: "1m",
    Resolution.HOUR: "1h",
}


def _at(ts: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ts)


class SensorReadings:
    """Implements ``agent.services.devices.sensors.ReadingsQuery`` over :class:`ReadingQuery`."""

    def __init__(self, query: ReadingQuery) -> None:
        self._query = query

    async def series(
        self,
        device_id: str,
        metrics: Sequence[str] | None,
        start: datetime,
        end: datetime,
        max_points: int,
    ) -> tuple[Literal["raw", "1m", "1h"], Sequence[Series]]:
        """Readings in [start, end) at the finest resolution within ``max_points`` per metric."""
        start_ms, end_ms = to_ms(start), to_ms(end)
        budget = self._query.check(start_ms, end_ms, max_points)
        found = await self._query.read(device_id, metrics, start_ms, end_ms, budget)
        resolution = found[0].resolution if found else Resolution.RAW
        return _NAMES[resolution], [
            Series(
                metric=data.metric,
                points=[
                    SeriesPoint(_at(p.ts), value=p.mean, min=p.min, max=p.max, count=p.count)
                    for p in data.points
                ],
            )
            for data in found
        ]

    async def aggregates(
        self, device_ids: Sequence[str], start: datetime, end: datetime
    ) -> Sequence[Aggregate]:
        """Per-metric min, max, mean and count over the devices' readings in [start, end)."""
        summaries = await self._query.device_metrics(device_ids, to_ms(start), to_ms(end))
        return [
            Aggregate(
                metric=s.metric,
                sensor_count=s.sensors,
                count=s.count,
                min=s.min,
                max=s.max,
                mean=s.mean,
            )
            for s in summaries
        ]
