"""Webhooks of the farms the caller manages (admins and farm managers with write access), their
deliveries, and the test message. Delivery itself is integrations/webhooks/'s deliverer over the
store's outbox; this service wakes it when it queued something."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agent.store.access import farm_grant
from agent.store.db import Database
from integrations.webhooks import TEST_EVENT, new_secret, test_body
from integrations.webhooks.agent_side.store import WebhookStore
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
from protocol.access import Action, authorize, require_role
from protocol.errors import NotFound
from protocol.identity import Principal, Role
from protocol.timefmt import iso, utcnow

__all__ = ["WebhookService"]

_MANAGERS = (Role.ADMIN, Role.FARM_MANAGER)


class WebhookService:
    """Use cases of /api/v1/webhooks on the agent."""

    def __init__(
        self,
        db: Database,
        store: WebhookStore,
        wake: Callable[[], None],
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = db
        self._store = store
        self._wake = wake
        self._now = now

    async def _managed(self, principal: Principal, webhook_id: str) -> dict[str, Any]:
        require_role(principal, *_MANAGERS)
        row = await self._store.get(webhook_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Webhook not found")
        authorize(principal, Action.MANAGE, grant)
        return row

    async def list(self, principal: Principal, query: WebhookListQuery) -> WebhookList:
        """Webhooks of the farms the caller may manage; a farm filter naming an invisible farm
        is a 404."""
        require_role(principal, *_MANAGERS)
        farm_id = None if query.farm_id is None else str(query.farm_id)
        if farm_id is not None:
            authorize(principal, Action.MANAGE, await farm_grant(self._db, principal, farm_id))
        rows, total = await self._store.page(principal, farm_id, query.limit, query.offset)
        return WebhookList(
            webhooks=[WebhookView(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create(self, principal: Principal, body: WebhookCreate) -> WebhookCreated:
        """A webhook on a farm the caller manages; its secret is answered this once."""
        require_role(principal, *_MANAGERS)
        farm_id = str(body.farm_id)
        authorize(principal, Action.MANAGE, await farm_grant(self._db, principal, farm_id))
        secret = body.secret or new_secret()
        webhook_id = str(uuid.uuid4())
        stamp = iso(self._now())
        await self._store.create(
            {
                "id": webhook_id,
                "farm_id": farm_id,
                "url": body.url,
                "description": body.description,
                "event_types": [str(t) for t in body.event_types],
                "secret": secret,
                "enabled": int(body.enabled),
                "created_by": principal.user_id,
                "created_at": stamp,
                "updated_at": stamp,
            }
        )
        row = await self._store.get(webhook_id)
        if row is None:  # the farm was deleted in between
            raise NotFound("Farm not found")
        return WebhookCreated(**row, secret=secret)

    async def get(self, principal: Principal, webhook_id: str) -> WebhookView:
        """One webhook."""
        return WebhookView(**await self._managed(principal, webhook_id))

    async def replace(
        self, principal: Principal, webhook_id: str, body: WebhookBody
    ) -> WebhookView:
        """Replace the settings; enabling a disabled webhook starts its health afresh."""
        current = await self._managed(principal, webhook_id)
        changes: dict[str, Any] = {
            "url": body.url,
            "description": body.description,
            "event_types": [str(t) for t in body.event_types],
            "enabled": int(body.enabled),
            "updated_at": iso(self._now()),
        }
        if body.secret is not None:
            changes["secret"] = body.secret
        if body.enabled and not current["enabled"]:
            changes |= {"disabled_reason": None, "failing_since": None, "consecutive_failures": 0}
        elif not body.enabled and current["enabled"]:
            changes["disabled_reason"] = f"disabled by {principal.user_id}"
        if not await self._store.replace(webhook_id, changes):
            raise NotFound("Webhook not found")
        if body.enabled:
            self._wake()  # deliveries paused while it was disabled are due
        return await self.get(principal, webhook_id)

    async def delete(self, principal: Principal, webhook_id: str) -> None:
        """Remove a webhook and its deliveries."""
        await self._managed(principal, webhook_id)
        if not await self._store.delete(webhook_id):
            raise NotFound("Webhook not found")

    async def deliveries(
        self, principal: Principal, webhook_id: str, query: DeliveryListQuery
    ) -> WebhookDeliveryList:
        """A webhook's deliveries, newest first."""
        await self._managed(principal, webhook_id)
        rows, total = await self._store.deliveries(
            webhook_id, query.status, query.limit, query.offset
        )
        return WebhookDeliveryList(
            deliveries=[WebhookDelivery(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def send_test(self, principal: Principal, webhook_id: str) -> WebhookDelivery:
        """Queue a ``webhook.test`` delivery, sent like any other (even to a disabled webhook
        once it is enabled again)."""
        row = await self._managed(principal, webhook_id)
        at = self._now()
        delivery_id = await self._store.queue(
            webhook_id, TEST_EVENT, test_body(webhook_id, row["farm_id"], at), at
        )
        self._wake()
        delivery = await self._store.delivery(delivery_id)
        if delivery is None:  # the webhook was deleted in between
            raise NotFound("Webhook not found")
        return WebhookDelivery(**delivery)
