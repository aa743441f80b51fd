"""Sensors and their readings: /api/v1/sensors, /sensors/{id}/data, /sensors/metrics (DESIGN 6)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

from farm_client.resources.base import Id, Resource
from protocol.schemas.devices import DeviceStatus
from protocol.schemas.sensors import (
    CalibrationList,
    Sensor,
    SensorData,
    SensorList,
    SensorMetrics,
)

__all__ = ["Sensors"]


class Sensors(Resource):
    """/api/v1/sensors: sensors with their metrics and calibration state, and their readings."""

    async def list(
        self,
        *,
        farm_id: Id | None = None,
        device_type: str | None = None,
        status: DeviceStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> SensorList:
        """One page of sensors."""
        params = {
            "farm_id": None if farm_id is None else str(farm_id),
            "device_type": device_type,
            "status": status,
            "limit": limit,
            "offset": offset,
        }
        return await self._t.get("/api/v1/sensors", SensorList, params)

    def iterate(self, *, farm_id: Id | None = None, page_size: int = 100) -> AsyncIterator[Sensor]:
        """Every sensor (of one farm when ``farm_id`` is given)."""
        params = {"farm_id": None if farm_id is None else str(farm_id)}
        return self._t.pages("/api/v1/sensors", SensorList, "sensors", params, page_size)

    async def data(
        self,
        sensor_id: Id,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        metric: str | None = None,
        max_points: int | None = None,
    ) -> SensorData:
        """Readings of one sensor over a time range (default the last 24 h), per metric."""
        params = {"start": start, "end": end, "metric": metric, "max_points": max_points}
        return await self._t.get(f"/api/v1/sensors/{sensor_id}/data", SensorData, params)

    async def metrics(
        self,
        farm_id: Id,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        device_type: str | None = None,
    ) -> SensorMetrics:
        """Aggregates (min, max, mean, count) of a farm's readings per metric."""
        params = {"farm_id": str(farm_id), "start": start, "end": end, "device_type": device_type}
        return await self._t.get("/api/v1/sensors/metrics", SensorMetrics, params)

    async def calibrations(
        self, sensor_id: Id, *, limit: int = 50, offset: int = 0
    ) -> CalibrationList:
        """A sensor's calibration history, newest first."""
        path = f"/api/v1/sensors/{sensor_id}/calibrations"
        return await self._t.get(path, CalibrationList, {"limit": limit, "offset": offset})
