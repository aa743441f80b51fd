"""Actuator control: device commands, fan control and schedules (thin handlers)."""

from __future__ import annotations

from aiohttp import web

from agent.devices.codec import Command
from agent.web.keys import ACTUATOR_CONTROL, ACTUATORS
from protocol.errors import ServiceUnavailable
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.actuators import (
    CommandList,
    CommandListQuery,
    CommandRecord,
    CommandRequest,
    DeviceSchedule,
    FanControl,
    FanControlResult,
    Schedule,
)

api = Api()
_TAG = "Control"


@api.route(
    "POST",
    "/api/v1/devices/{device_id}/commands",
    summary="Command an actuator and wait for its confirmation",
    tag=_TAG,
    body=CommandRequest,
    response=CommandRecord,
    errors=(403, 409, 503),
)
async def send_command(request: web.Request, device_id: str, body: CommandRequest) -> CommandRecord:
    """Switch or set a fan, light, pump or valve; the answer is the stored outcome.

    A device that is not connected to the agent is a 503 (the attempt is still recorded).
    """
    record = await request.app[ACTUATORS].command(
        principal_of(request), device_id, Command(body.kind, body.value), source="manual"
    )
    if record.outcome == "unavailable":
        raise ServiceUnavailable(
            "Device is not connected to the agent",
            {"command_id": record.id, "outcome": record.outcome, "reason": record.detail},
        )
    return record


@api.route(
    "GET",
    "/api/v1/devices/{device_id}/commands",
    summary="Command history of an actuator",
    tag=_TAG,
    query=CommandListQuery,
    response=CommandList,
    errors=(403,),
)
async def list_commands(
    request: web.Request, device_id: str, query: CommandListQuery
) -> CommandList:
    """Every command sent to the device, newest first, with who asked and how it ended."""
    return await request.app[ACTUATORS].history(principal_of(request), device_id, query)


@api.route(
    "PUT",
    "/api/v1/fans/{fan_id}",
    summary="Control a fan: run, stop, set its speed, hand it to automation, schedule it",
    tag=_TAG,
    body=FanControl,
    response=FanControlResult,
    errors=(403, 409),
)
async def control_fan(request: web.Request, fan_id: str, body: FanControl) -> FanControlResult:
    """The fan control input; the answer is the fan, its schedule and the command outcome.

    ``status``: running | stopped (set by hand; automation leaves the fan alone) | auto (back
    to the climate loop and the schedule).
    """
    return await request.app[ACTUATOR_CONTROL].control_fan(principal_of(request), fan_id, body)


@api.route(
    "GET",
    "/api/v1/devices/{device_id}/schedule",
    summary="An actuator's schedule",
    tag=_TAG,
    response=Schedule,
    errors=(403,),
)
async def get_schedule(request: web.Request, device_id: str) -> Schedule:
    """The daily window, control mode and whether the window is open now."""
    return await request.app[ACTUATOR_CONTROL].schedule(principal_of(request), device_id)


@api.route(
    "PUT",
    "/api/v1/devices/{device_id}/schedule",
    summary="Set an actuator's daily schedule",
    tag=_TAG,
    body=DeviceSchedule,
    response=Schedule,
    errors=(403, 409),
)
async def set_schedule(request: web.Request, device_id: str, body: DeviceSchedule) -> Schedule:
    """Switch a light, pump or valve (or a fan) on and off daily; it applies at once."""
    return await request.app[ACTUATOR_CONTROL].set_schedule(principal_of(request), device_id, body)
