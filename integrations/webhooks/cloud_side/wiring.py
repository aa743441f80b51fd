"""Outgoing webhooks of the cloud: the service behind /api/v1/webhooks, and delivery loops that
share the outbox with every other cloud process. Targets must be public addresses unless
CLOUD_WEBHOOK_ALLOW_PRIVATE_TARGETS is set."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.settings import CloudSettings
from cloud.web.keys import DATABASE, WEBHOOK_DELIVERER, WEBHOOKS
from farmkit.secretbox import SecretBox
from integrations.webhooks import (
    AddressPolicy,
    WebhookDeliverer,
    WebhookSender,
    open_session,
)
from integrations.webhooks.cloud_side.service import WebhookSecrets, WebhookService
from integrations.webhooks.cloud_side.store import WebhookOutbox
from protocol.version import distribution_version

__all__ = ["webhooks_context"]


def webhooks_context(
    settings: CloudSettings, secret_box: Callable[[], SecretBox]
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Serve webhooks and deliver the outbox for the application's lifetime."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        policy = settings.delivery_policy()
        addresses = AddressPolicy(allow_private=settings.webhook_allow_private_targets)
        secrets = WebhookSecrets(secret_box())
        db = app[DATABASE]
        session = open_session(addresses, connections=max(1, policy.workers) * policy.batch)
        sender = WebhookSender(
            session,
            addresses,
            timeout_s=policy.timeout_s,
            user_agent=f"farm-cloud/{distribution_version()} (webhooks)",
        )
        deliverer = WebhookDeliverer(WebhookOutbox(db, secrets.open), sender, policy)
        app[WEBHOOK_DELIVERER] = deliverer
        app[WEBHOOKS] = WebhookService(db, secrets, addresses, deliverer.wake)
        deliverer.start()
        try:
            yield
        finally:
            await deliverer.stop()
            await session.close()

    return context
