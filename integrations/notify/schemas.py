"""Contact points, notification rules and the notification history (agent and cloud alike)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import ConfigDict, Field, field_validator, model_validator

from integrations.notify.catalogue import NotifyKind
from integrations.notify.quiet import parse_hhmm
from integrations.notify.sender import url_problem
from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

__all__ = [
    "AcknowledgeLinkQuery",
    "ContactPointBody",
    "ContactPointCreate",
    "ContactPointList",
    "ContactPointListQuery",
    "ContactPointTest",
    "ContactPointView",
    "NotificationList",
    "NotificationListQuery",
    "NotificationRuleBody",
    "NotificationRuleCreate",
    "NotificationRuleList",
    "NotificationRuleView",
    "NotificationStatus",
    "NotificationView",
    "Severity",
]

NotificationStatus = Literal["pending", "sent", "failed", "cancelled", "handover"]
Severity = Literal["debug", "info", "warning", "error", "critical"]
MAX_URL_LENGTH = 2000


class ContactPointBody(ApiModel):
    """PUT /contact-points/{id}: every setting replaced. ``url`` replaces the Apprise URL when
    given; left out, the URL stays (it is never shown back)."""

    name: str = Field(min_length=1, max_length=100)
    url: str | None = Field(None, min_length=1, max_length=MAX_URL_LENGTH)
    owner_id: UUID | None = None
    quiet_start: str | None = None
    quiet_end: str | None = None
    enabled: bool = True

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and (problem := url_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("quiet_start", "quiet_end")
    @classmethod
    def _hhmm(cls, value: str | None) -> str | None:
        if value is not None:
            parse_hhmm(value)
        return value

    @model_validator(mode="after")
    def _both(self) -> ContactPointBody:
        if (self.quiet_start is None) != (self.quiet_end is None):
            raise ValueError("quiet hours need both quiet_start and quiet_end")
        return self


class ContactPointCreate(ContactPointBody):
    """POST /contact-points: an Apprise URL (``ntfy://``, ``tgram://``, ``pover://``,
    ``mailtos://``, ``hassio://``, ...) or ``mailto:address`` for the configured mail server.
    ``owner_id`` defaults to the caller."""

    farm_id: UUID
    url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)


class ContactPointView(Schema):
    """A contact point as answered: the service its URL names, never the URL."""

    id: Uuid
    farm_id: Uuid
    name: str
    service: str
    owner_id: Uuid | None
    quiet_start: str | None
    quiet_end: str | None
    enabled: bool
    failing_since: Timestamp | None
    consecutive_failures: int
    last_success_at: Timestamp | None
    last_failure_at: Timestamp | None
    last_error: str | None
    created_at: Timestamp
    updated_at: Timestamp


class ContactPointListQuery(PageQuery):
    """GET /contact-points: optionally one farm's."""

    model_config = ConfigDict(extra="ignore")

    farm_id: UUID | None = None


class ContactPointList(Schema):
    """GET /contact-points."""

    contact_points: list[ContactPointView]
    total: int
    limit: int
    offset: int


class ContactPointTest(Schema):
    """POST /contact-points/{id}/test: whether the service took the test message, and what it
    answered."""

    ok: bool
    answer: str
    notification_id: Uuid


def _serious() -> list[Severity]:
    return ["warning", "error", "critical"]


class NotificationRuleBody(ApiModel):
    """PUT /notification-rules/{id}: every setting replaced."""

    name: str = Field("", max_length=100)
    event_kinds: list[NotifyKind] = Field(min_length=1, max_length=len(NotifyKind))
    severities: list[Severity] = Field(default_factory=_serious, min_length=1, max_length=5)
    contact_point_ids: list[UUID] = Field(min_length=1, max_length=20)
    offline_after_min: int = Field(0, ge=0, le=10_080)
    repeat_every_min: int | None = Field(None, ge=1, le=10_080)
    escalate_after_min: int | None = Field(None, ge=1, le=10_080)
    escalate_to: list[UUID] = Field(default_factory=list, max_length=20)
    enabled: bool = True

    @field_validator("event_kinds", "severities", "contact_point_ids", "escalate_to")
    @classmethod
    def _distinct(cls, value: list[object]) -> list[object]:
        if len(set(value)) != len(value):
            raise ValueError("each at most once")
        return value

    @model_validator(mode="after")
    def _escalation(self) -> NotificationRuleBody:
        if (self.escalate_after_min is None) != (not self.escalate_to):
            raise ValueError("escalation needs both escalate_after_min and escalate_to")
        return self


class NotificationRuleCreate(NotificationRuleBody):
    """POST /notification-rules: which events of a farm go to which of its contact points."""

    farm_id: UUID


class NotificationRuleView(Schema):
    """A notification rule."""

    id: Uuid
    farm_id: Uuid
    name: str
    event_kinds: list[str]
    severities: list[str]
    contact_point_ids: list[Uuid]
    offline_after_min: int
    repeat_every_min: int | None
    escalate_after_min: int | None
    escalate_to: list[Uuid]
    enabled: bool
    created_at: Timestamp
    updated_at: Timestamp


class NotificationRuleList(Schema):
    """GET /notification-rules."""

    notification_rules: list[NotificationRuleView]
    total: int
    limit: int
    offset: int


class NotificationView(Schema):
    """One message to one contact point: its state, what the service answered, and who
    acknowledged the event behind it. The cloud's messages (a farm silent or back, one its
    agent handed over) have no rule nor event there, and are never acknowledged."""

    id: Uuid
    farm_id: Uuid
    farm_name: str | None
    contact_point_id: Uuid
    contact_point_name: str | None
    rule_id: Uuid | None
    event_id: str | None
    step: Literal["first", "repeat", "escalation", "test"]
    round: int
    kind: str
    severity: str
    message: str
    status: NotificationStatus
    attempts: int
    answer: str | None
    last_attempt_at: Timestamp | None
    next_attempt_at: Timestamp | None
    created_at: Timestamp
    sent_at: Timestamp | None
    acknowledged_at: Timestamp | None
    acknowledged_by: str | None
    acknowledged_by_email: str | None


class NotificationListQuery(PageQuery):
    """GET /notifications: newest first; optionally one farm's, one status, one event's."""

    model_config = ConfigDict(extra="ignore")

    farm_id: UUID | None = None
    status: NotificationStatus | None = None
    event_id: str | None = Field(None, max_length=100)


class AcknowledgeLinkQuery(ApiModel):
    """POST /notifications/acknowledge: the signed token a message's Acknowledge button
    carries."""

    model_config = ConfigDict(extra="ignore")

    token: str = Field(min_length=1, max_length=300)


class NotificationList(Schema):
    """GET /notifications."""

    notifications: list[NotificationView]
    total: int
    limit: int
    offset: int
