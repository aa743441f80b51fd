"""/api/v1/sensors: the list and metrics shared with the cloud (protocol/http/sensor_routes.py),
then the agent's own readings and calibration handlers."""

from __future__ import annotations

from aiohttp import web

from agent.services.devices.sensors import SensorService
from agent.web.keys import CALIBRATION, CALIBRATION_SESSIONS, SENSORS
from protocol.http.endpoints import principal_of
from protocol.http.sensor_routes import TAG as _TAG
from protocol.http.sensor_routes import sensor_api
from protocol.schemas.sensors import (
    Calibrate,
    Calibration,
    CalibrationList,
    CalibrationListQuery,
    CalibrationSession,
    SensorData,
    SensorDataQuery,
)


def _sensors(request: web.Request) -> SensorService:
    return request.app[SENSORS]


api = sensor_api(_sensors)


@api.route(
    "GET",
    "/api/v1/sensors/{sensor_id}/data",
    summary="Sensor readings over a time range",
    tag=_TAG,
    query=SensorDataQuery,
    response=SensorData,
    errors=(503,),
)
async def sensor_data(request: web.Request, sensor_id: str, query: SensorDataQuery) -> SensorData:
    """Readings at a resolution chosen from the range and the point budget."""
    return await request.app[SENSORS].data(principal_of(request), sensor_id, query)


@api.route(
    "POST",
    "/api/v1/sensors/{sensor_id}/calibrate",
    summary="Calibrate a sensor",
    tag=_TAG,
    body=Calibrate,
    response=Calibration,
    status=201,
    errors=(403, 409, 502, 503, 504),
)
async def calibrate_sensor(request: web.Request, sensor_id: str, body: Calibrate) -> Calibration:
    """Run the sensor's calibration procedure; the attempt is kept in its history either way."""
    return await request.app[CALIBRATION].calibrate(principal_of(request), sensor_id, body)


@api.route(
    "GET",
    "/api/v1/sensors/{sensor_id}/calibrations",
    summary="Calibration history of a sensor",
    tag=_TAG,
    query=CalibrationListQuery,
    response=CalibrationList,
)
async def calibration_history(
    request: web.Request, sensor_id: str, query: CalibrationListQuery
) -> CalibrationList:
    """Every calibration attempt, newest first, with who, when, points and result."""
    return await request.app[CALIBRATION].history(principal_of(request), sensor_id, query)


@api.route(
    "POST",
    "/api/v1/sensors/{sensor_id}/calibration-session",
    summary="Start a step-by-step on-device calibration",
    tag=_TAG,
    body=Calibrate,
    response=CalibrationSession,
    status=201,
    errors=(403, 409, 502, 503, 504),
)
async def start_calibration_session(
    request: web.Request, sensor_id: str, body: Calibrate
) -> CalibrationSession:
    """Check the plan and the device, then wait for the probe to be in the first solution."""
    sessions = request.app[CALIBRATION_SESSIONS]
    return await sessions.start(principal_of(request), sensor_id, body)


@api.route(
    "GET",
    "/api/v1/sensors/{sensor_id}/calibration-session",
    summary="The sensor's calibration session",
    tag=_TAG,
    response=CalibrationSession,
)
async def get_calibration_session(request: web.Request, sensor_id: str) -> CalibrationSession:
    """Which point the session waits for."""
    return await request.app[CALIBRATION_SESSIONS].state(principal_of(request), sensor_id)


@api.route(
    "POST",
    "/api/v1/sensors/{sensor_id}/calibration-session/next",
    summary="Take the waiting calibration point",
    tag=_TAG,
    response=CalibrationSession,
    errors=(403, 409, 502, 503, 504),
)
async def next_calibration_step(request: web.Request, sensor_id: str) -> CalibrationSession:
    """The probe is in place: take the point, then wait for the next (or finish)."""
    return await request.app[CALIBRATION_SESSIONS].next(principal_of(request), sensor_id)


@api.route(
    "DELETE",
    "/api/v1/sensors/{sensor_id}/calibration-session",
    summary="Cancel the calibration session",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def cancel_calibration_session(request: web.Request, sensor_id: str) -> None:
    """Stop before the next point; the attempt is kept as failed."""
    await request.app[CALIBRATION_SESSIONS].cancel(principal_of(request), sensor_id)
