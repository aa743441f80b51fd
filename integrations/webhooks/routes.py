"""/api/v1/webhooks, declared once for the agent and the cloud: both serve the same paths,
schemas and answers, each over its own webhook service, which an app-specific getter finds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from integrations.webhooks.schemas import (
    DeliveryListQuery,
    WebhookBody,
    WebhookCreate,
    WebhookCreated,
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookList,
    WebhookListQuery,
    WebhookView,
)
from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal

__all__ = ["WebhookManagement", "webhooks_api"]

_TAG = "Webhooks"


class WebhookManagement(Protocol):
    """What the webhook endpoints need of a webhook service."""

    async def list(self, principal: Principal, query: WebhookListQuery) -> WebhookList: ...
    async def create(self, principal: Principal, body: WebhookCreate) -> WebhookCreated: ...
    async def get(self, principal: Principal, webhook_id: str) -> WebhookView: ...
    async def replace(
        self, principal: Principal, webhook_id: str, body: WebhookBody
    ) -> WebhookView: ...
    async def delete(self, principal: Principal, webhook_id: str) -> None: ...
    async def deliveries(
        self, principal: Principal, webhook_id: str, query: DeliveryListQuery
    ) -> WebhookDeliveryList: ...
    async def send_test(self, principal: Principal, webhook_id: str) -> WebhookDelivery: ...


def webhooks_api(webhooks: Callable[[web.Application], WebhookManagement]) -> Api:
    """Outgoing webhooks (admins and farm managers, on farms they may write)."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/webhooks",
        summary="Webhooks of the farms the caller manages",
        tag=_TAG,
        query=WebhookListQuery,
        response=WebhookList,
        errors=(403, 404),
    )
    async def list_webhooks(request: web.Request, query: WebhookListQuery) -> WebhookList:
        """Oldest first, without their secrets."""
        return await webhooks(request.app).list(principal_of(request), query)

    @api.route(
        "POST",
        "/api/v1/webhooks",
        summary="Add a webhook; its signing secret is shown once",
        tag=_TAG,
        body=WebhookCreate,
        response=WebhookCreated,
        status=201,
        errors=(403, 404),
    )
    async def create_webhook(request: web.Request, body: WebhookCreate) -> WebhookCreated:
        """Deliveries of the farm's events of the given types, signed with the secret."""
        return await webhooks(request.app).create(principal_of(request), body)

    @api.route(
        "GET",
        "/api/v1/webhooks/{webhook_id}",
        summary="One webhook, without its secret",
        tag=_TAG,
        response=WebhookView,
        errors=(403, 404),
    )
    async def get_webhook(request: web.Request, webhook_id: str) -> WebhookView:
        """Its settings and health (failing since, consecutive failures)."""
        return await webhooks(request.app).get(principal_of(request), webhook_id)

    @api.route(
        "PUT",
        "/api/v1/webhooks/{webhook_id}",
        summary="Replace a webhook's settings (and optionally its secret)",
        tag=_TAG,
        body=WebhookBody,
        response=WebhookView,
        errors=(403, 404),
    )
    async def replace_webhook(
        request: web.Request, webhook_id: str, body: WebhookBody
    ) -> WebhookView:
        """Enabling a disabled webhook starts its health afresh."""
        return await webhooks(request.app).replace(principal_of(request), webhook_id, body)

    @api.route(
        "DELETE",
        "/api/v1/webhooks/{webhook_id}",
        summary="Remove a webhook and its deliveries",
        tag=_TAG,
        status=204,
        errors=(403, 404),
    )
    async def delete_webhook(request: web.Request, webhook_id: str) -> None:
        """Nothing more is sent to it."""
        await webhooks(request.app).delete(principal_of(request), webhook_id)

    @api.route(
        "GET",
        "/api/v1/webhooks/{webhook_id}/deliveries",
        summary="A webhook's deliveries: status, attempts, last response, next attempt",
        tag=_TAG,
        query=DeliveryListQuery,
        response=WebhookDeliveryList,
        errors=(403, 404),
    )
    async def list_deliveries(
        request: web.Request, webhook_id: str, query: DeliveryListQuery
    ) -> WebhookDeliveryList:
        """Newest first."""
        return await webhooks(request.app).deliveries(principal_of(request), webhook_id, query)

    @api.route(
        "POST",
        "/api/v1/webhooks/{webhook_id}/test",
        summary="Queue a signed webhook.test delivery to the webhook",
        tag=_TAG,
        response=WebhookDelivery,
        status=202,
        errors=(403, 404),
    )
    async def test_webhook(request: web.Request, webhook_id: str) -> WebhookDelivery:
        """Sent like any delivery (retried on failure); follow it in the deliveries list."""
        return await webhooks(request.app).send_test(principal_of(request), webhook_id)

    return api
