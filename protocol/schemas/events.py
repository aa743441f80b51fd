"""Device events and alerts as the read API lists them."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import Field, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, UtcDatetime, Uuid

__all__ = [
    "Event",
    "EventGroupAcknowledge",
    "EventGroupAcknowledged",
    "EventList",
    "EventListQuery",
    "Severity",
]

Severity = Literal["debug", "info", "warning", "error", "critical"]


class Event(Schema):
    """One event; ``timestamp`` is when it happened on the farm."""

    id: Uuid
    farm_id: Uuid
    device_id: Uuid | None
    kind: str
    severity: str
    message: str
    data: dict[str, Any]
    timestamp: Timestamp
    acknowledged_at: Timestamp | None
    acknowledged_by: Uuid | None


class EventList(Schema):
    """GET /events, newest first."""

    events: list[Event]
    total: int
    limit: int
    offset: int


class EventListQuery(PageQuery):
    """Query of GET /events: optional filters; ``since`` inclusive, ``until`` exclusive."""

    farm_id: UUID | None = None
    device_id: UUID | None = None
    severity: Severity | None = None
    kind: str | None = Field(None, max_length=64)
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None
    acknowledged: bool | None = Field(None, description="Only acknowledged ones, or only not")
    q: str | None = Field(None, max_length=200, description="Kind or message contains this")

    @model_validator(mode="after")
    def _ordered(self) -> EventListQuery:
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class EventGroupAcknowledge(ApiModel):
    """POST /events/acknowledge: every event of a farm of one kind and device (none: events of
    no device) up to ``until`` inclusive that is not acknowledged yet."""

    farm_id: UUID
    kind: str = Field(min_length=1, max_length=64)
    device_id: UUID | None = None
    until: UtcDatetime


class EventGroupAcknowledged(Schema):
    """How many events the group acknowledgement marked."""

    acknowledged: int
