"""Outgoing webhooks and their deliveries (agent and cloud alike)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import ConfigDict, Field, field_validator

from integrations.webhooks.catalogue import WebhookEventType
from integrations.webhooks.signing import check_secret
from integrations.webhooks.targets import MAX_URL_LENGTH, url_problem
from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

__all__ = [
    "DeliveryListQuery",
    "DeliveryStatus",
    "WebhookBody",
    "WebhookCreate",
    "WebhookCreated",
    "WebhookDelivery",
    "WebhookDeliveryList",
    "WebhookList",
    "WebhookListQuery",
    "WebhookView",
]

DeliveryStatus = Literal["pending", "delivered", "failed"]


class WebhookBody(ApiModel):
    """PUT /webhooks/{id}: every setting replaced. ``secret`` replaces the signing secret
    when given (``whsec_`` + base64 of 24-64 bytes); left out, the secret stays."""

    url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)
    event_types: list[WebhookEventType] = Field(min_length=1, max_length=len(WebhookEventType))
    description: str = Field("", max_length=200)
    enabled: bool = True
    secret: str | None = Field(None, max_length=200)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        problem = url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("event_types")
    @classmethod
    def _distinct(cls, value: list[WebhookEventType]) -> list[WebhookEventType]:
        if len(set(value)) != len(value):
            raise ValueError("each event type at most once")
        return value

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else check_secret(value)


class WebhookCreate(WebhookBody):
    """POST /webhooks: a receiver of one farm's events. Without ``secret`` one is generated;
    the answer shows it once."""

    farm_id: UUID


class WebhookView(Schema):
    """A webhook as answered; the secret is never part of it."""

    id: Uuid
    farm_id: Uuid
    url: str
    description: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    failing_since: Timestamp | None
    consecutive_failures: int
    last_success_at: Timestamp | None
    last_failure_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp


class WebhookCreated(WebhookView):
    """The answer to POST /webhooks: the only one that carries the secret."""

    secret: str


class WebhookListQuery(PageQuery):
    """GET /webhooks: optionally one farm's."""

    model_config = ConfigDict(extra="ignore")

    farm_id: UUID | None = None


class WebhookList(Schema):
    """GET /webhooks."""

    webhooks: list[WebhookView]
    total: int
    limit: int
    offset: int


class WebhookDelivery(Schema):
    """One message to one webhook: its state and its last attempt. ``id`` is the
    ``webhook-id`` header the receiver sees (the same on every retry)."""

    id: Uuid
    webhook_id: Uuid
    event_type: str
    event_id: str | None
    status: DeliveryStatus
    attempts: int
    last_status_code: int | None
    last_error: str | None
    last_attempt_at: Timestamp | None
    next_attempt_at: Timestamp | None
    created_at: Timestamp
    delivered_at: Timestamp | None


class DeliveryListQuery(PageQuery):
    """GET /webhooks/{id}/deliveries: newest first, optionally of one status."""

    model_config = ConfigDict(extra="ignore")

    status: DeliveryStatus | None = None


class WebhookDeliveryList(Schema):
    """GET /webhooks/{id}/deliveries."""

    deliveries: list[WebhookDelivery]
    total: int
    limit: int
    offset: int
