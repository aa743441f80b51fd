"""Webhooks of the farms the caller manages (admins and farm managers with write access; RLS
picks the farms), their deliveries and the test message. Targets must be public addresses
unless the operator allows private ones (SSRF); delivery re-checks them where it connects."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.store.db import Connection, Database
from farmkit.secretbox import SecretBox
from integrations.webhooks import (
    TEST_EVENT,
    AddressPolicy,
    TargetRefused,
    check_target,
    new_secret,
    test_body,
)
from integrations.webhooks.cloud_side import store
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
from protocol.access import Action, require_role
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import Principal, Role
from protocol.timefmt import iso, utcnow

__all__ = ["WebhookSecrets", "WebhookService"]

_MANAGERS = (Role.ADMIN, Role.FARM_MANAGER)
_RESOLVE_TIMEOUT_S = 5.0


class WebhookSecrets:
    """Seals a webhook's secret under the operator's key, bound to the webhook's id."""

    def __init__(self, box: SecretBox) -> None:
        self._box = box

    def seal(self, webhook_id: UUID, secret: str) -> bytes:
        """Encrypt the signing secret of a webhook."""
        return self._box.seal(secret, f"webhooks:{webhook_id}:secret")

    def open(self, webhook_id: UUID, sealed: bytes) -> str:
        """Decrypt what :meth:`seal` produced."""
        return self._box.open(sealed, f"webhooks:{webhook_id}:secret")


def _view(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as the answer's fields (ids and times as text)."""
    out = dict(row)
    for name in ("id", "farm_id", "webhook_id"):
        if out.get(name) is not None:
            out[name] = str(out[name])
    for name, value in out.items():
        if hasattr(value, "isoformat"):
            out[name] = iso(value)
    if "event_types" in out:
        out["event_types"] = list(out["event_types"])
    return out


class WebhookService:
    """Use cases of /api/v1/webhooks on the cloud."""

    def __init__(
        self,
        db: Database,
        secrets: WebhookSecrets,
        addresses: AddressPolicy,
        wake: Callable[[], None],
    ) -> None:
        self._db = db
        self._secrets = secrets
        self._addresses = addresses
        self._wake = wake

    async def _check_target(self, url: str) -> None:
        try:
            await check_target(url, self._addresses, timeout_s=_RESOLVE_TIMEOUT_S)
        except TargetRefused as err:
            raise ValidationFailed.of(
                [("url", f"{err}; webhooks reach public addresses only")],
                "The webhook's address is not allowed",
            ) from None

    async def _managed(
        self, conn: Connection, principal: Principal, webhook_id: str
    ) -> dict[str, Any]:
        require_role(principal, *_MANAGERS)
        row = await store.get(conn, UUID(webhook_id))
        if row is None:
            raise NotFound("Webhook not found")
        await authorize_farm(conn, principal, row["farm_id"], Action.MANAGE)
        return row

    async def list(self, principal: Principal, query: WebhookListQuery) -> WebhookList:
        """Webhooks of the farms the caller may write; a farm filter naming an invisible farm
        is a 404."""
        require_role(principal, *_MANAGERS)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.MANAGE)
            rows, total = await store.page(conn, query.farm_id, query.limit, query.offset)
        return WebhookList(
            webhooks=[WebhookView(**_view(row)) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create(self, principal: Principal, body: WebhookCreate) -> WebhookCreated:
        """A webhook on a farm the caller manages; its secret is answered this once."""
        require_role(principal, *_MANAGERS)
        # Authorized before the target is resolved (a caller learns nothing of addresses on a
        # farm they may not manage) and again where it is written: no transaction stays open
        # while DNS answers.
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, body.farm_id, Action.MANAGE)
        await self._check_target(body.url)
        secret = body.secret or new_secret()
        webhook_id = uuid.uuid4()
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, body.farm_id, Action.MANAGE)
            await store.create(
                conn,
                {
                    "id": webhook_id,
                    "farm_id": body.farm_id,
                    "url": body.url,
                    "description": body.description,
                    "event_types": [str(t) for t in body.event_types],
                    "secret": self._secrets.seal(webhook_id, secret),
                    "enabled": body.enabled,
                    "created_by": UUID(principal.user_id),
                },
            )
            row = await store.get(conn, webhook_id)
        assert row is not None  # written in this transaction
        return WebhookCreated(**_view(row), secret=secret)

    async def get(self, principal: Principal, webhook_id: str) -> WebhookView:
        """One webhook."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            return WebhookView(**_view(await self._managed(conn, principal, webhook_id)))

    async def replace(
        self, principal: Principal, webhook_id: str, body: WebhookBody
    ) -> WebhookView:
        """Replace the settings; enabling a disabled webhook starts its health afresh."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await self._managed(conn, principal, webhook_id)
        await self._check_target(body.url)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            current = await self._managed(conn, principal, webhook_id)
            changes: dict[str, Any] = {
                "url": body.url,
                "description": body.description,
                "event_types": [str(t) for t in body.event_types],
                "enabled": body.enabled,
                "updated_at": utcnow(),
            }
            if body.secret is not None:
                changes["secret"] = self._secrets.seal(UUID(webhook_id), body.secret)
            if body.enabled and not current["enabled"]:
                changes |= {
                    "disabled_reason": None,
                    "failing_since": None,
                    "consecutive_failures": 0,
                }
            elif not body.enabled and current["enabled"]:
                changes["disabled_reason"] = f"disabled by {principal.user_id}"
            if not await store.replace(conn, UUID(webhook_id), changes):
                raise NotFound("Webhook not found")
            row = await store.get(conn, UUID(webhook_id))
        if row is None:
            raise NotFound("Webhook not found")
        if body.enabled:
            self._wake()
        return WebhookView(**_view(row))

    async def delete(self, principal: Principal, webhook_id: str) -> None:
        """Remove a webhook and its deliveries."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await self._managed(conn, principal, webhook_id)
            if not await store.delete(conn, UUID(webhook_id)):
                raise NotFound("Webhook not found")

    async def deliveries(
        self, principal: Principal, webhook_id: str, query: DeliveryListQuery
    ) -> WebhookDeliveryList:
        """A webhook's deliveries, newest first."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await self._managed(conn, principal, webhook_id)
            rows, total = await store.deliveries(
                conn, UUID(webhook_id), query.status, query.limit, query.offset
            )
        return WebhookDeliveryList(
            deliveries=[WebhookDelivery(**_view(row)) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def send_test(self, principal: Principal, webhook_id: str) -> WebhookDelivery:
        """Queue a ``webhook.test`` delivery, sent like any other."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await self._managed(conn, principal, webhook_id)
            body = test_body(webhook_id, str(row["farm_id"]), utcnow())
            delivery = await store.queue(conn, UUID(webhook_id), row["farm_id"], TEST_EVENT, body)
        self._wake()
        return WebhookDelivery(**_view(delivery))
