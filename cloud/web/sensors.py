"""/api/v1/sensors and /sensors/metrics (protocol/http/sensor_routes.py) over the mirror."""

from __future__ import annotations

from aiohttp import web

from cloud.services.sensors import SensorService
from cloud.web.keys import SENSORS
from protocol.http.sensor_routes import sensor_api

__all__ = ["api"]


def _sensors(request: web.Request) -> SensorService:
    return request.app[SENSORS]


api = sensor_api(_sensors)
