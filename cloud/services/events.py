"""Device events and alerts of the mirror as the caller may see them."""

from __future__ import annotations

from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.store import events as store
from cloud.store.db import Database
from protocol.access import Action
from protocol.identity import Principal
from protocol.schemas.events import Event, EventList, EventListQuery

__all__ = ["EventService"]


class EventService:
    """Lists events, newest first; a farm filter naming an invisible farm is a 404."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, query: EventListQuery) -> EventList:
        """Visible events, filtered and paged."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await store.list_events(
                conn,
                farm_id=query.farm_id,
                device_id=query.device_id,
                severity=query.severity,
                kind=query.kind,
                since=query.since,
                until=query.until,
                limit=query.limit,
                offset=query.offset,
                acknowledged=query.acknowledged,
                search=query.q,
            )
        return EventList(
            events=[Event(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )
