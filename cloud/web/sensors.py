"""/api/v1/sensors and /sensors/metrics over the mirror: thin handlers."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import SENSORS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.sensors import (
    SensorList,
    SensorListQuery,
    SensorMetrics,
    SensorMetricsQuery,
)

api = Api()
_TAG = "Sensors"


@api.route(
    "GET",
    "/api/v1/sensors",
    summary="List sensors",
    tag=_TAG,
    query=SensorListQuery,
    response=SensorList,
    errors=(404,),
)
async def list_sensors(request: web.Request, query: SensorListQuery) -> SensorList:
    """Sensors of the farms the caller may see, filtered and paged."""
    return await request.app[SENSORS].list(principal_of(request), query)


@api.route(
    "GET",
    "/api/v1/sensors/metrics",
    summary="Sensor counts and metric aggregates of a farm",
    tag=_TAG,
    query=SensorMetricsQuery,
    response=SensorMetrics,
    errors=(403, 404),
)
async def sensor_metrics(request: web.Request, query: SensorMetricsQuery) -> SensorMetrics:
    """Per-metric min, max, mean and count over the farm's sensors' raw readings."""
    return await request.app[SENSORS].metrics(principal_of(request), query)
