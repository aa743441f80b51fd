"""/api/v1/events: thin handlers over EventService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import EVENTS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.events import (
    Event,
    EventGroupAcknowledge,
    EventGroupAcknowledged,
    EventList,
    EventListQuery,
)

api = Api()
_TAG = "Events"


@api.route(
    "GET",
    "/api/v1/events",
    summary="The event log, newest first",
    tag=_TAG,
    query=EventListQuery,
    response=EventList,
    errors=(404,),
)
async def list_events(request: web.Request, query: EventListQuery) -> EventList:
    """Device, farm and alert events of the farms the caller may see."""
    return await request.app[EVENTS].list(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/events/{event_id}/acknowledge",
    summary="Acknowledge an event",
    tag=_TAG,
    response=Event,
    errors=(403,),
)
async def acknowledge_event(request: web.Request, event_id: str) -> Event:
    """Mark an event seen by the caller (needs write access to its farm)."""
    return await request.app[EVENTS].acknowledge(principal_of(request), event_id)


@api.route(
    "POST",
    "/api/v1/events/acknowledge",
    summary="Acknowledge a group of like events",
    tag=_TAG,
    body=EventGroupAcknowledge,
    response=EventGroupAcknowledged,
    errors=(403, 404),
)
async def acknowledge_event_group(
    request: web.Request, body: EventGroupAcknowledge
) -> EventGroupAcknowledged:
    """Every event of the farm of one kind and device up to ``until`` not acknowledged yet."""
    return await request.app[EVENTS].acknowledge_group(principal_of(request), body)
