"""Outgoing webhooks: the service behind /api/v1/webhooks and the delivery loops, for the
application's lifetime. The agent allows every target address (its receivers are on the LAN)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.settings import AgentSettings
from agent.web.keys import DATABASE, WEBHOOK_DELIVERER, WEBHOOKS
from agent.wiring.context import CleanupContext
from integrations.webhooks import (
    AddressPolicy,
    WebhookDeliverer,
    WebhookSender,
    open_session,
)
from integrations.webhooks.agent_side.service import WebhookService
from integrations.webhooks.agent_side.store import WebhookStore
from protocol.version import distribution_version

__all__ = ["webhooks_context"]


def webhooks_context(settings: AgentSettings) -> CleanupContext:
    """Serve webhooks and deliver their outbox for the application's lifetime."""

    async def webhooks(app: web.Application) -> AsyncIterator[None]:
        policy = settings.delivery_policy()
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
