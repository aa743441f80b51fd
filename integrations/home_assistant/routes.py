"""/api/v1/home-automation/*, which agent and cloud both serve.

Declared once: each side hands over how a request finds its integration service
(``integrations.home_assistant.service.HomeAutomation``, built over that side's grants, event
log, close store and area/entity assignments). Reads show the entities of farms the caller may
read; control needs control of the entity's farm (``integrations.home_assistant.ownership``);
admins map hub areas and entities to farms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from integrations.home_assistant.schemas import (
    HubAreaAssignment,
    HubAssignmentList,
    HubAssignmentRequest,
    HubControlRequest,
    HubControlResult,
    HubDeviceList,
    HubDeviceQuery,
    HubEntityAssignment,
    HubIrrigationControl,
    HubLightControl,
    HubSensorList,
    HubStatus,
)
from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal

__all__ = ["HubIntegration", "home_automation_api"]

_TAG = "Home automation"
_HUB_ERRORS = (502, 503, 504)
_CONTROL_ERRORS = (403, 404, *_HUB_ERRORS)
_ADMIN_ERRORS = (403, 404)
#: The hub's own ids: an area registry id, an entity id.
_AREA = {"area": r"[A-Za-z0-9_.-]{1,255}"}
_ENTITY = {"entity": r"[a-z0-9_]+\.[a-z0-9_]+"}


class HubIntegration(Protocol):
    """One side's hub integration service."""

    async def status(self, principal: Principal) -> HubStatus:
        """Enabled, configured, reachable, version, proxy, last error, latency, pending closes."""
        ...

    async def devices(self, principal: Principal, query: HubDeviceQuery) -> HubDeviceList:
        """The hub's entities of farms the caller may read, filtered."""
        ...

    async def sensors(self, principal: Principal) -> HubSensorList:
        """The hub's sensor entities of farms the caller may read."""
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

    async def assignments(self, principal: Principal) -> HubAssignmentList:
        """Every area mapping and entity assignment (admins)."""
        ...

    async def set_area(
        self, principal: Principal, area_id: str, body: HubAssignmentRequest
    ) -> HubAreaAssignment:
        """Map a hub area to a farm (admins)."""
        ...

    async def clear_area(self, principal: Principal, area_id: str) -> None:
        """Unmap a hub area (admins)."""
        ...

    async def set_entity(
        self, principal: Principal, entity_id: str, body: HubAssignmentRequest
    ) -> HubEntityAssignment:
        """Assign an entity to a farm (admins)."""
        ...

    async def clear_entity(self, principal: Principal, entity_id: str) -> None:
        """Remove an entity's assignment (admins)."""
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
        summary="The hub's entities of the farms the caller may read",
        tag=_TAG,
        query=HubDeviceQuery,
        response=HubDeviceList,
        errors=_HUB_ERRORS,
    )
    async def hub_devices(request: web.Request, query: HubDeviceQuery) -> HubDeviceList:
        """Each entity with its domain, state, attributes, last change, area and farm; filter
        by domain/area. Entities of no farm are listed to admins only."""
        return await integration_of(request).devices(principal_of(request), query)

    @api.route(
        "GET",
        "/api/v1/home-automation/sensors",
        summary="The hub's sensors of the farms the caller may read",
        tag=_TAG,
        response=HubSensorList,
        errors=_HUB_ERRORS,
    )
    async def hub_sensors(request: web.Request) -> HubSensorList:
        """Sensor entities, their values, units and device classes."""
        return await integration_of(request).sensors(principal_of(request))

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

    @api.route(
        "GET",
        "/api/v1/home-automation/assignments",
        summary="Which farm each hub area and assigned entity belongs to (admins)",
        tag=_TAG,
        response=HubAssignmentList,
        errors=(403,),
    )
    async def hub_assignments(request: web.Request) -> HubAssignmentList:
        """An entity's own assignment wins over its area's; an entity of neither is of no farm
        (admins alone see and control it)."""
        return await integration_of(request).assignments(principal_of(request))

    @api.route(
        "PUT",
        "/api/v1/home-automation/areas/{area}",
        summary="Map a hub area to a farm (admins)",
        tag=_TAG,
        body=HubAssignmentRequest,
        response=HubAreaAssignment,
        errors=_ADMIN_ERRORS,
        path_patterns=_AREA,
    )
    async def hub_set_area(
        request: web.Request, area: str, body: HubAssignmentRequest
    ) -> HubAreaAssignment:
        """``area`` is the hub's area registry id (an entity's ``area_id``)."""
        return await integration_of(request).set_area(principal_of(request), area, body)

    @api.route(
        "DELETE",
        "/api/v1/home-automation/areas/{area}",
        summary="Unmap a hub area (admins)",
        tag=_TAG,
        status=204,
        errors=_ADMIN_ERRORS,
        path_patterns=_AREA,
    )
    async def hub_clear_area(request: web.Request, area: str) -> None:
        """Its entities are of no farm again, unless assigned on their own."""
        await integration_of(request).clear_area(principal_of(request), area)

    @api.route(
        "PUT",
        "/api/v1/home-automation/entities/{entity}",
        summary="Assign a hub entity to a farm, whatever its area (admins)",
        tag=_TAG,
        body=HubAssignmentRequest,
        response=HubEntityAssignment,
        errors=_ADMIN_ERRORS,
        path_patterns=_ENTITY,
    )
    async def hub_set_entity(
        request: web.Request, entity: str, body: HubAssignmentRequest
    ) -> HubEntityAssignment:
        """The entity need not be on the hub yet."""
        return await integration_of(request).set_entity(principal_of(request), entity, body)

    @api.route(
        "DELETE",
        "/api/v1/home-automation/entities/{entity}",
        summary="Remove a hub entity's farm assignment (admins)",
        tag=_TAG,
        status=204,
        errors=_ADMIN_ERRORS,
        path_patterns=_ENTITY,
    )
    async def hub_clear_entity(request: web.Request, entity: str) -> None:
        """Its area's farm applies again."""
        await integration_of(request).clear_entity(principal_of(request), entity)

    return api
