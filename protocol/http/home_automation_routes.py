"""/api/v1/home-automation/* (SPEC.md "Hub integration"), which agent and cloud both serve.

Declared once: each side hands over how a request finds its integration service
(``home_hub.service.HomeAutomation``, built over that side's grants, event log and close store).
Reads need any signed-in caller; control needs control of the farm named in the body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal
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

__all__ = ["HubIntegration", "home_automation_api"]

_TAG = "Home automation"
_HUB_ERRORS = (502, 503, 504)
_CONTROL_ERRORS = (403, 404, *_HUB_ERRORS)


class HubIntegration(Protocol):
    """One side's hub integration service."""

    async def status(self, principal: Principal) -> HubStatus:
        """Enabled, configured, reachable, version, proxy, last error, latency, pending closes."""
        ...

    async def devices(self, query: HubDeviceQuery) -> HubDeviceList:
        """The hub's entities, filtered."""
        ...

    async def sensors(self) -> HubSensorList:
        """The hub's sensor entities."""
        ...

    async def control(self, principal: Principal, body: HubControlRequest) -> HubControlResult:
        """Call a service on an entity."""
        ...

    async def light(self, principal: Principal, body: HubLightControl) -> HubControlResult:
        """Switch a light."""
        ...

    async def irrigation(
        self, principal: Principal, body: HubIrrigationControl
    ) -> HubControlResult:
        """Open, close or position a valve, optionally for a time."""
        ...


def home_automation_api(integration_of: Callable[[web.Request], HubIntegration]) -> Api:
    """The hub endpoints, answered by the service ``integration_of(request)`` returns."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/home-automation/status",
        summary="Whether the hub integration is on and the hub answers",
        tag=_TAG,
        response=HubStatus,
    )
    async def hub_status(request: web.Request) -> HubStatus:
        """Enabled, configured, reachable, the hub's version, proxy in use, last error, latency,
        and the irrigation closes still pending on the farms the caller sees."""
        return await integration_of(request).status(principal_of(request))

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
        """Every entity with its domain, state, attributes and last change; filter by
        domain/area."""
        principal_of(request)
        return await integration_of(request).devices(query)

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
        return await integration_of(request).sensors()

    @api.route(
        "POST",
        "/api/v1/home-automation/devices/control",
        summary="Call a hub service on an entity",
        tag=_TAG,
        body=HubControlRequest,
        response=HubControlResult,
        errors=_CONTROL_ERRORS,
    )
    async def hub_control(request: web.Request, body: HubControlRequest) -> HubControlResult:
        """``action`` is the service of the entity's domain; the answer lists the changed
        states."""
        return await integration_of(request).control(principal_of(request), body)

    @api.route(
        "POST",
        "/api/v1/home-automation/lights/control",
        summary="Switch a hub light, set its brightness or colour temperature",
        tag=_TAG,
        body=HubLightControl,
        response=HubControlResult,
        errors=_CONTROL_ERRORS,
    )
    async def hub_lights(request: web.Request, body: HubLightControl) -> HubControlResult:
        """On/off, brightness 0-100 %, colour temperature in kelvin."""
        return await integration_of(request).light(principal_of(request), body)

    @api.route(
        "POST",
        "/api/v1/home-automation/irrigation/control",
        summary="Open, close or position a hub valve, optionally for a time",
        tag=_TAG,
        body=HubIrrigationControl,
        response=HubControlResult,
        errors=_CONTROL_ERRORS,
    )
    async def hub_irrigation(request: web.Request, body: HubIrrigationControl) -> HubControlResult:
        """With ``duration_s`` the server closes it again itself after that long, durably."""
        return await integration_of(request).irrigation(principal_of(request), body)

    return api
