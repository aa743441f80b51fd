"""/api/v1/devices, /sensors/{id}/data and /events over the mirror: thin handlers."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import DEVICES, EVENTS, READINGS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.devices import DeviceList, DeviceListQuery
from protocol.schemas.events import EventList, EventListQuery
from protocol.schemas.sensors import SensorData, SensorDataQuery

api = Api()


@api.route(
    "GET",
    "/api/v1/devices",
    summary="List devices",
    tag="Devices",
    query=DeviceListQuery,
    response=DeviceList,
    errors=(404,),
)
async def list_devices(request: web.Request, query: DeviceListQuery) -> DeviceList:
    """Devices of the farms the caller may see, filtered and paged."""
    return await request.app[DEVICES].list(principal_of(request), query)


@api.route(
    "GET",
    "/api/v1/sensors/{sensor_id}/data",
    summary="Sensor readings by range and metric",
    tag="Sensors",
    query=SensorDataQuery,
    response=SensorData,
)
async def sensor_data(request: web.Request, sensor_id: str, query: SensorDataQuery) -> web.Response:
    """Readings at the finest resolution (raw, 1 minute, 1 hour) that fits max_points."""
    data = await request.app[READINGS].sensor_data(principal_of(request), sensor_id, query)
    return web.Response(body=data.json(), content_type="application/json")


@api.route(
    "GET",
    "/api/v1/events",
    summary="List device events and alerts",
    tag="Events",
    query=EventListQuery,
    response=EventList,
    errors=(404,),
)
async def list_events(request: web.Request, query: EventListQuery) -> EventList:
    """Events of the farms the caller may see, newest first."""
    return await request.app[EVENTS].list(principal_of(request), query)
