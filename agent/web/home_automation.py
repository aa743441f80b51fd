"""The hub integration (SPEC.md "Hub integration"): thin handlers over ``HomeAutomation``."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import HOME_AUTOMATION
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.home_automation import (
    HubControlRequest,
    HubControlResult,
    HubDeviceList,
    HubDeviceQuery,
    HubIrrigationControl,
    HubLightControl,
    HubSensorList,
    HubStatus,
)

api = Api()
_TAG = "Home automation"
_HUB_ERRORS = (502, 503, 504)


@api.route(
    "GET",
    "/api/v1/home-automation/status",
    summary="Whether the hub integration is on and the hub answers",
    tag=_TAG,
    response=HubStatus,
)
async def hub_status(request: web.Request) -> HubStatus:
    """Enabled, configured, reachable, the hub's version, proxy in use, last error, latency."""
    principal_of(request)
    return await request.app[HOME_AUTOMATION].status()


@api.route(
    "GET",
    "/api/v1/home-automation/devices",
    summary="The hub's entities",
    tag=_TAG,
    query=HubDeviceQuery,
    response=HubDeviceList,
    errors=_HUB_ERRORS,
)
async def hub_devices(request: web.Request, query: HubDeviceQuery) -> HubDeviceList:
    """Every entity with its domain, state, attributes and last change; filter by domain/area."""
    principal_of(request)
    return await request.app[HOME_AUTOMATION].devices(query)


@api.route(
    "GET",
    "/api/v1/home-automation/sensors",
    summary="The hub's sensors with units and device classes",
    tag=_TAG,
    response=HubSensorList,
    errors=_HUB_ERRORS,
)
async def hub_sensors(request: web.Request) -> HubSensorList:
    """Sensor entities, their values, units and device classes."""
    principal_of(request)
    return await request.app[HOME_AUTOMATION].sensors()


@api.route(
    "POST",
    "/api/v1/home-automation/devices/control",
    summary="Call a hub service on an entity",
    tag=_TAG,
    body=HubControlRequest,
    response=HubControlResult,
    errors=(403, 404, *_HUB_ERRORS),
)
async def hub_control(request: web.Request, body: HubControlRequest) -> HubControlResult:
    """``action`` is the service of the entity's domain; the answer lists the changed states."""
    return await request.app[HOME_AUTOMATION].control(principal_of(request), body)


@api.route(
    "POST",
    "/api/v1/home-automation/lights/control",
    summary="Switch a hub light, set its brightness or colour temperature",
    tag=_TAG,
    body=HubLightControl,
    response=HubControlResult,
    errors=(403, 404, *_HUB_ERRORS),
)
async def hub_lights(request: web.Request, body: HubLightControl) -> HubControlResult:
    """On/off, brightness 0-100 %, colour temperature in kelvin."""
    return await request.app[HOME_AUTOMATION].light(principal_of(request), body)


@api.route(
    "POST",
    "/api/v1/home-automation/irrigation/control",
    summary="Open, close or position a hub valve, optionally for a time",
    tag=_TAG,
    body=HubIrrigationControl,
    response=HubControlResult,
    errors=(403, 404, *_HUB_ERRORS),
)
async def hub_irrigation(request: web.Request, body: HubIrrigationControl) -> HubControlResult:
    """With ``duration_s`` the agent closes it again itself after that long."""
    return await request.app[HOME_AUTOMATION].irrigation(principal_of(request), body)
