"""GET /api/v1/sensors and /api/v1/sensors/metrics, which agent and cloud both serve, declared once.

Each side hands over how a request finds its sensor service: the agent answers from its registry
and SQLite readings, the cloud from the mirror under the caller's row-level security; the
endpoints, schemas and status codes are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal
from protocol.schemas.sensors import SensorList, SensorListQuery, SensorMetrics, SensorMetricsQuery

__all__ = ["SensorReads", "sensor_api"]

TAG = "Sensors"


class SensorReads(Protocol):
    """One side's sensor service."""

    async def list_sensors(self, principal: Principal, query: SensorListQuery) -> SensorList:
        """Visible sensors, filtered and paged; a farm filter the caller may not see is refused."""
        ...

    async def metrics(self, principal: Principal, query: SensorMetricsQuery) -> SensorMetrics:
        """Sensor counts and per-metric aggregates of a farm over a range (default 24 h)."""
        ...


def sensor_api(sensors_of: Callable[[web.Request], SensorReads]) -> Api:
    """The sensor list and metrics, answered by the service ``sensors_of(request)`` returns."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/sensors",
        summary="List sensors with metrics and calibration",
        tag=TAG,
        query=SensorListQuery,
        response=SensorList,
        errors=(403, 404),
    )
    async def list_sensors(request: web.Request, query: SensorListQuery) -> SensorList:
        """Sensors on farms the caller may see, filtered and paged."""
        return await sensors_of(request).list_sensors(principal_of(request), query)

    @api.route(
        "GET",
        "/api/v1/sensors/metrics",
        summary="Sensor counts and metric aggregates of a farm",
        tag=TAG,
        query=SensorMetricsQuery,
        response=SensorMetrics,
        errors=(403, 404),
    )
    async def sensor_metrics(request: web.Request, query: SensorMetricsQuery) -> SensorMetrics:
        """Per-metric min, max, mean and count over the farm's sensors."""
        return await sensors_of(request).metrics(principal_of(request), query)

    return api
