"""The sensor view of the registry: sensors with their metrics and calibration, their readings,
and farm-wide sensor metrics. Readings come from the readings query service (``ReadingsQuery``),
attached once the store that holds them is open."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from agent.devices.profiles import FirmwareProfile
from agent.services.devices.registry import DeviceService
from agent.store.calibrations import CalibrationStore
from agent.store.devices import DeviceFilter, DeviceStore
from protocol.access import Action
from protocol.errors import ServiceUnavailable, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.sensors import (
    ActiveCalibrationRef,
    MetricAggregate,
    MetricSeries,
    ReadingPoint,
    Resolution,
    Sensor,
    SensorCalibrationInfo,
    SensorData,
    SensorDataQuery,
    SensorList,
    SensorListQuery,
    SensorMetric,
    SensorMetrics,
    SensorMetricsQuery,
)
from protocol.timefmt import iso, utcnow

__all__ = [
    "Aggregate",
    "ReadingsQuery",
    "SensorService",
    "Series",
    "SeriesPoint",
]

DEFAULT_RANGE = timedelta(hours=24)


@dataclass(frozen=True)
class SeriesPoint:
    """One point of a series: a raw reading (count 1) or a rollup bucket."""

    at: datetime
    value: float
    min: float
    max: float
    count: int


@dataclass(frozen=True)
class Series:
    """The readings of one metric of one device."""

    metric: str
    points: Sequence[SeriesPoint]


@dataclass(frozen=True)
class Aggregate:
    """One metric over several devices and a time range."""

    metric: str
    sensor_count: int
    count: int
    min: float | None
    max: float | None
    mean: float | None


class ReadingsQuery(Protocol):
    """What the sensor views need from the readings store (docs/design.md section 6)."""

    async def series(
        self,
        device_id: str,
        metrics: Sequence[str] | None,
        start: datetime,
        end: datetime,
        max_points: int,
    ) -> tuple[Resolution, Sequence[Series]]:
        """Readings in [start, end) at the finest resolution within ``max_points`` per metric
        (every metric the device reported when ``metrics`` is None)."""
        ...

    async def aggregates(
        self, device_ids: Sequence[str], start: datetime, end: datetime
    ) -> Sequence[Aggregate]:
        """Per-metric min, max, mean and count over the devices' readings in [start, end)."""
        ...


class SensorService:
    """Sensors as the caller may see them."""

    def __init__(
        self,
        devices: DeviceService,
        device_store: DeviceStore,
        calibrations: CalibrationStore,
        *,
        readings: ReadingsQuery | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._devices = devices
        self._device_store = device_store
        self._calibrations = calibrations
        self._readings = readings
        self._now = now

    def attach(self, readings: ReadingsQuery) -> None:
        """Connect the readings query service once its store is open."""
        self._readings = readings

    async def list_sensors(self, principal: Principal, query: SensorListQuery) -> SensorList:
        """Visible sensors with their metrics and calibration."""
        farm_id = None if query.farm_id is None else str(query.farm_id)
        if farm_id is not None:
            await self._devices.authorize_farm(principal, farm_id, Action.READ)
        where = DeviceFilter(
            farm_id,
            "sensor",
            query.device_type,
            query.status,
            location=query.location,
            search=query.q,
            sort=query.sort,
        )
        rows, total = await self._device_store.list_visible(
            principal, where, query.limit, query.offset
        )
        active: dict[str, list[sqlite3.Row]] = {row["id"]: [] for row in rows}
        for calibration in await self._calibrations.active_of_devices(list(active)):
            active[calibration["device_id"]].append(calibration)
        sensors = [
            self._sensor(row, self._devices.profile_of(row), active[row["id"]]) for row in rows
        ]
        return SensorList(sensors=sensors, total=total, limit=query.limit, offset=query.offset)

    @staticmethod
    def _sensor(
        row: sqlite3.Row, profile: FirmwareProfile | None, active: list[sqlite3.Row]
    ) -> Sensor:
        metrics = [] if profile is None else _metrics(profile)
        calibration = None
        if profile is not None and profile.calibration is not None:
            spec = profile.calibration
            calibration = SensorCalibrationInfo(
                performed_by=spec.performed_by,
                method=spec.method,
                metrics=list(spec.metrics),
                points=[point.name for point in spec.points],
                min_points=spec.min_points,
                max_points=spec.max_points,
                instructions=spec.instructions,
                active=[
                    ActiveCalibrationRef(
                        metric=item["metric"],
                        calibration_id=item["id"],
                        method=item["method"],
                        performed_at=item["performed_at"],
                    )
                    for item in active
                ],
            )
        return Sensor(
            id=row["id"],
            name=row["name"],
            device_type=row["device_type"],
            farm_id=row["farm_id"],
            location=row["location"],
            status=row["status"],
            profile=row["profile"],
            last_reading=row["last_reading"],
            metrics=metrics,
            calibration=calibration,
        )

    async def data(
        self, principal: Principal, sensor_id: str, query: SensorDataQuery
    ) -> SensorData:
        """A sensor's readings over a time range (default the last 24 h)."""
        row = await self._devices.device_for(principal, sensor_id, Action.READ)
        profile = self._devices.profile_of(row)
        units = {metric.name: metric.unit for metric in profile.metrics} if profile else {}
        if query.metric is not None and profile is not None and query.metric not in units:
            known = ", ".join(units)
            raise ValidationFailed.of([("query.metric", f"this sensor reports {known}")])
        start, end = self._range(query.start, query.end)
        readings = self._require_readings()
        metrics = None if query.metric is None else [query.metric]
        resolution, series = await readings.series(sensor_id, metrics, start, end, query.max_points)
        return SensorData(
            sensor_id=sensor_id,
            start=iso(start),
            end=iso(end),
            resolution=resolution,
            series=[
                MetricSeries(
                    metric=item.metric,
                    unit=units.get(item.metric, ""),
                    points=[
                        ReadingPoint(
                            timestamp=iso(point.at),
                            value=point.value,
                            min=point.min,
                            max=point.max,
                            count=point.count,
                        )
                        for point in item.points
                    ],
                )
                for item in series
            ],
        )

    async def metrics(self, principal: Principal, query: SensorMetricsQuery) -> SensorMetrics:
        """Sensor counts and per-metric aggregates of a farm over a range (default 24 h)."""
        farm_id = str(query.farm_id)
        await self._devices.authorize_farm(principal, farm_id, Action.METRICS)
        rows = await self._device_store.of_farm(farm_id, "sensor", query.device_type)
        start, end = self._range(query.start, query.end)
        online = sum(1 for row in rows if row["status"] == "online")
        aggregates: Sequence[Aggregate] = ()
        if self._readings is not None and rows:
            aggregates = await self._readings.aggregates([row["id"] for row in rows], start, end)
        units: dict[str, str] = {}
        for row in rows:
            profile = self._devices.profile_of(row)
            for metric in profile.metrics if profile else ():
                units.setdefault(metric.name, metric.unit)
        return SensorMetrics(
            farm_id=farm_id,
            start=iso(start),
            end=iso(end),
            total_sensors=len(rows),
            online_sensors=online,
            offline_sensors=len(rows) - online,
            metrics=[
                MetricAggregate(
                    metric=item.metric,
                    unit=units.get(item.metric, ""),
                    sensor_count=item.sensor_count,
                    count=item.count,
                    min=item.min,
                    max=item.max,
                    mean=item.mean,
                )
                for item in aggregates
            ],
        )

    def _range(self, start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
        end = end or self._now()
        start = start or end - DEFAULT_RANGE
        if start >= end:
            raise ValidationFailed.of([("query.start", "must be before end")])
        return start, end

    def _require_readings(self) -> ReadingsQuery:
        if self._readings is None:
            raise ServiceUnavailable("Readings are not available yet")
        return self._readings


def _metrics(profile: FirmwareProfile) -> list[SensorMetric]:
    return [
        SensorMetric(name=metric.name, unit=metric.unit, min=metric.min, max=metric.max)
        for metric in profile.metrics
    ]
