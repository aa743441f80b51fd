"""/api/v1/discovered-devices: thin handlers over FoundDevices."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import FOUND
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.devices import Device
from protocol.schemas.discovery import DiscoveredDeviceAccept, DiscoveredDeviceList, DiscoveredQuery

api = Api()
_TAG = "Devices"


@api.route(
    "GET",
    "/api/v1/discovered-devices",
    summary="Devices found on the network and not yet added",
    tag=_TAG,
    query=DiscoveredQuery,
    response=DiscoveredDeviceList,
    errors=(403,),
)
async def list_discovered(request: web.Request, query: DiscoveredQuery) -> DiscoveredDeviceList:
    """What Tasmota, ESPHome, zigbee2mqtt and Shelly devices announced, with the proposed
    firmware profile and address and the readings heard so far (admins and farm managers)."""
    return await request.app[FOUND].list(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/discovered-devices/{found_id}/accept",
    summary="Add a found device",
    tag=_TAG,
    body=DiscoveredDeviceAccept,
    response=Device,
    status=201,
    errors=(403, 404, 409),
)
async def accept_discovered(
    request: web.Request, found_id: str, body: DiscoveredDeviceAccept
) -> Device:
    """Register it on a farm and place, with the same checks as POST /devices."""
    return await request.app[FOUND].accept(principal_of(request), found_id, body)


@api.route(
    "POST",
    "/api/v1/discovered-devices/{found_id}/ignore",
    summary="Hide a found device",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def ignore_discovered(request: web.Request, found_id: str) -> None:
    """It is not listed again, even when it announces itself again."""
    await request.app[FOUND].ignore(principal_of(request), found_id)
