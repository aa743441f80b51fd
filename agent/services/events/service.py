"""Reading the event log as the caller may see it, and acknowledging events."""

from __future__ import annotations

from agent.store.access import farm_grant
from agent.store.db import Database
from agent.store.events import EventFilter, EventStore
from protocol.access import Action, authorize
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.schemas.events import (
    Event,
    EventGroupAcknowledge,
    EventGroupAcknowledged,
    EventList,
    EventListQuery,
)
from protocol.timefmt import iso, now_iso

__all__ = ["EventService"]


class EventService:
    """Lists events newest first; acknowledging needs write access to the event's farm."""

    def __init__(self, db: Database, store: EventStore) -> None:
        self._db = db
        self._store = store

    async def list(self, principal: Principal, query: EventListQuery) -> EventList:
        """Visible events, filtered and paged; a farm filter naming an invisible farm is a 404."""
        farm_id = None if query.farm_id is None else str(query.farm_id)
        if farm_id is not None:
            authorize(principal, Action.READ, await farm_grant(self._db, principal, farm_id))
        where = EventFilter(
            farm_id=farm_id,
            device_id=None if query.device_id is None else str(query.device_id),
            severity=query.severity,
            kind=query.kind,
            since=None if query.since is None else iso(query.since),
            until=None if query.until is None else iso(query.until),
            acknowledged=query.acknowledged,
            search=query.q,
        )
        rows, total = await self._store.list(principal, where, query.limit, query.offset)
        return EventList(
            events=[Event(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def acknowledge_group(
        self, principal: Principal, body: EventGroupAcknowledge
    ) -> EventGroupAcknowledged:
        """Acknowledge a group of like events at once (needs write access to the farm)."""
        farm_id = str(body.farm_id)
        authorize(principal, Action.CONTROL, await farm_grant(self._db, principal, farm_id))
        count = await self._store.acknowledge_group(
            farm_id,
            body.kind,
            None if body.device_id is None else str(body.device_id),
            iso(body.until),
            principal.user_id,
            now_iso(),
        )
        return EventGroupAcknowledged(acknowledged=count)

    async def acknowledge(self, principal: Principal, event_id: str) -> Event:
        """Mark an event seen; acknowledging it again keeps the first acknowledgement."""
        event = await self._store.get(event_id)
        grant = None if event is None else await farm_grant(self._db, principal, event["farm_id"])
        if event is None or grant is None:
            raise NotFound("Event not found")
        authorize(principal, Action.CONTROL, grant)
        row = await self._store.acknowledge(event_id, principal.user_id, now_iso())
        if row is None:  # deleted (retention, farm removed) between the two statements
            raise NotFound("Event not found")
        return Event(**row)
