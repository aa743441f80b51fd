"""Outgoing webhooks: the service behind /api/v1/webhooks and the delivery loops, for the
application's lifetime. The agent allows every target address (its receivers are on the LAN)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.settings import AgentSettings
from agent.web.keys import DATABASE, WEBHOOK_DELIVERER, WEBHOOKS
from agent.wiring.context import CleanupContext
from farmkit.backoff import Backoff
from integrations.webhooks import (
    AddressPolicy,
    DeliveryPolicy,
    WebhookDeliverer,
    WebhookSender,
    open_session,
)
from integrations.webhooks.agent_side.service import WebhookService
from integrations.webhooks.agent_side.store import WebhookStore
from protocol.version import distribution_version

__all__ = ["delivery_policy", "webhooks_context"]


def delivery_policy(settings: AgentSettings) -> DeliveryPolicy:
    """The delivery rules from the settings."""
    return DeliveryPolicy(
        timeout_s=settings.webhook_timeout_s,
        batch=settings.webhook_batch,
        workers=settings.webhook_workers,
        poll_s=settings.webhook_poll_s,
        retry=Backoff(settings.webhook_retry_initial_s, settings.webhook_retry_max_s),
        retry_window_s=settings.webhook_retry_window_s,
        disable_after_s=settings.webhook_disable_after_s,
        keep_s=_days(settings.webhook_delivery_retention_days),
    )


def _days(value: float | None) -> float | None:
    return None if value is None else value * 86_400.0


def webhooks_context(settings: AgentSettings) -> CleanupContext:
    """Serve webhooks and deliver their outbox for the application's lifetime."""

    async def webhooks(app: web.Application) -> AsyncIterator[None]:
        policy = delivery_policy(settings)
        addresses = AddressPolicy(allow_private=True)
        store = WebhookStore(app[DATABASE])
        session = open_session(addresses, connections=policy.workers * policy.batch)
        sender = WebhookSender(
            session,
            addresses,
            timeout_s=policy.timeout_s,
            user_agent=f"farm-agent/{distribution_version()} (webhooks)",
        )
        deliverer = WebhookDeliverer(store, sender, policy)
        app[WEBHOOK_DELIVERER] = deliverer
        app[WEBHOOKS] = WebhookService(app[DATABASE], store, deliverer.wake)
        deliverer.start()
        try:
            yield
        finally:
            await deliverer.stop()
            await session.close()

    return webhooks
