"""/api/v1/sensor-devices/, /api/v1/fans/ and /api/v1/devices: thin handlers over DeviceService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import DEVICES
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.devices import (
    Device,
    DeviceCreate,
    DeviceList,
    DeviceListQuery,
    DeviceProfileList,
    DeviceStatusUpdate,
    DeviceUpdate,
    FanList,
    FanListQuery,
    SensorDevice,
    SensorDeviceCreate,
    SensorDeviceList,
    SensorDeviceQuery,
)

api = Api()
_TAG = "Devices"


@api.route(
    "GET",
    "/api/v1/sensor-devices/",
    summary="List sensor devices",
    tag=_TAG,
    query=SensorDeviceQuery,
    response=SensorDeviceList,
    errors=(403, 404),
)
async def list_sensor_devices(request: web.Request, query: SensorDeviceQuery) -> SensorDeviceList:
    """Sensor devices on farms the caller may see, by farm, device type and status."""
    return await request.app[DEVICES].list_sensor_devices(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/sensor-devices/",
    summary="Register a sensor device",
    tag=_TAG,
    body=SensorDeviceCreate,
    response=SensorDevice,
    status=201,
    errors=(403, 404, 409),
)
async def create_sensor_device(request: web.Request, body: SensorDeviceCreate) -> SensorDevice:
    """Register a sensor; with a profile and address the agent starts reading it."""
    return await request.app[DEVICES].register_sensor(principal_of(request), body)


@api.route(
    "GET",
    "/api/v1/fans/",
    summary="List fans",
    tag=_TAG,
    query=FanListQuery,
    response=FanList,
    errors=(403, 404),
)
async def list_fans(request: web.Request, query: FanListQuery) -> FanList:
    """Fans on farms the caller may see, with speed, power and running time."""
    return await request.app[DEVICES].list_fans(principal_of(request), query)


@api.route(
    "GET",
    "/api/v1/devices",
    summary="List devices of every kind",
    tag=_TAG,
    query=DeviceListQuery,
    response=DeviceList,
    errors=(403, 404),
)
async def list_devices(request: web.Request, query: DeviceListQuery) -> DeviceList:
    """The registry as the caller may see it."""
    return await request.app[DEVICES].list_devices(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/devices",
    summary="Register a device",
    tag=_TAG,
    body=DeviceCreate,
    response=Device,
    status=201,
    errors=(403, 404, 409),
)
async def create_device(request: web.Request, body: DeviceCreate) -> Device:
    """Register a sensor, fan, light, pump or valve with its firmware profile and address."""
    return await request.app[DEVICES].register(principal_of(request), body)


@api.route(
    "GET",
    "/api/v1/devices/{device_id}",
    summary="Device details",
    tag=_TAG,
    response=Device,
)
async def get_device(request: web.Request, device_id: str) -> Device:
    """Every registry field of one device."""
    return await request.app[DEVICES].detail(principal_of(request), device_id)


@api.route(
    "PUT",
    "/api/v1/devices/{device_id}",
    summary="Rename a device or change its location",
    tag=_TAG,
    body=DeviceUpdate,
    response=Device,
    errors=(403,),
)
async def update_device(request: web.Request, device_id: str, body: DeviceUpdate) -> Device:
    """Name and location; the address and profile stay (delete and add to change them)."""
    return await request.app[DEVICES].update(principal_of(request), device_id, body)


@api.route(
    "GET",
    "/api/v1/device-profiles",
    summary="Firmware profiles a device can be added with",
    tag=_TAG,
    response=DeviceProfileList,
)
async def list_device_profiles(request: web.Request) -> DeviceProfileList:
    """Every loaded profile: kind, transport, topic variables, metrics and commands."""
    return request.app[DEVICES].profile_list()


@api.route(
    "PUT",
    "/api/v1/devices/{device_id}/status",
    summary="Set a device's status (active, maintenance, disabled)",
    tag=_TAG,
    body=DeviceStatusUpdate,
    response=Device,
    errors=(403,),
)
async def set_device_status(
    request: web.Request, device_id: str, body: DeviceStatusUpdate
) -> Device:
    """Take a device out of service or put it back."""
    return await request.app[DEVICES].set_status(principal_of(request), device_id, body)


@api.route(
    "DELETE",
    "/api/v1/devices/{device_id}",
    summary="Remove a device",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def delete_device(request: web.Request, device_id: str) -> None:
    """Remove the device and its calibration history."""
    await request.app[DEVICES].delete(principal_of(request), device_id)
