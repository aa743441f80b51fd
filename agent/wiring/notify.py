"""Notifications to people: the service behind /api/v1/contact-points, /notification-rules and
/notifications, and the sending loop, for the application's lifetime. Contact point URLs are
sealed under a key derived from the agent's signing key (backed up with the state)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web

from agent.services.notify.service import NotifyService
from agent.settings import AgentSettings
from agent.store.notify import NotifyStore
from agent.web.keys import (
    DATABASE,
    EVENT_LOG,
    EVENTS,
    HEALTH,
    NOTIFY,
    NOTIFY_DELIVERER,
    SYNC,
)
from agent.wiring.context import CleanupContext
from agent.wiring.mail import smtp_settings
from farmkit.backoff import Backoff
from farmkit.secretbox import SecretBox, derived_key
from farmkit.tasks import cancel_and_wait
from integrations.notify import AckLinks, ContactSender, NotifyDeliverer, NotifyPolicy
from protocol.keyfile import load_or_create_private_key

__all__ = ["notify_context", "notify_policy"]

_KEY_PURPOSE = "farm-agent contact point urls"
_LINK_PURPOSE = "farm-agent acknowledge links"


def notify_policy(settings: AgentSettings) -> NotifyPolicy:
    """The sending rules from the settings."""
    return NotifyPolicy(
        poll_s=settings.notify_poll_s,
        batch=settings.notify_batch,
        retry=Backoff(settings.notify_retry_initial_s, settings.notify_retry_max_s),
        retry_window_s=settings.notify_retry_window_s,
        failing_event_after_s=settings.notify_failing_event_after_s,
        timezone=settings.timezone,
        public_url=settings.notify_public_url,
        plan_every_s=min(5.0, settings.notify_poll_s * 10),
        handover_after_s=settings.notify_handover_after_s,
    )


def notify_context(settings: AgentSettings) -> CleanupContext:
    """Serve contact points and rules and send the notification outbox for the application's
    lifetime; report failing contact points in /healthz."""

    async def notify(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        signing = load_or_create_private_key(settings.signing_key_path)
        sync = app.get(SYNC)
        store = NotifyStore(
            db,
            SecretBox(derived_key(signing, _KEY_PURPOSE)),
            None if sync is None else sync.sealing,
        )
        if sync is not None:  # paired before the cloud's key was known: send them all then
            sync.sealing.when_learned(store.queue_all_for_cloud)
        links = AckLinks(derived_key(signing, _LINK_PURPOSE))
        policy = notify_policy(settings)
        sender = ContactSender(smtp_settings(settings), concurrency=policy.batch)
        deliverer = NotifyDeliverer(store, sender, policy, ack_links=links)
        if sync is not None:
            deliverer.can_hand_over = lambda: sync.uploading
        app[NOTIFY_DELIVERER] = deliverer
        if EVENT_LOG in app:  # an event's first messages are due the moment it is written
            app[EVENT_LOG].after_write.append(deliverer.wake)
        app[NOTIFY] = NotifyService(db, store, sender, app[EVENTS], deliverer.wake, ack_links=links)
        health = {"text": "ok", "status": "healthy"}
        every_s = min(30.0, max(1.0, policy.poll_s * 10))

        async def watch_health() -> None:
            while True:
                failing = await store.failing()
                # Failing long enough to raise its event: the agent cannot reach a person.
                long = any(row["failing_reported_at"] for row in failing)
                health["status"] = "degraded" if long else "healthy"
                health["text"] = (
                    "ok"
                    if not failing
                    else "failing: "
                    + "; ".join(
                        f"{row['name']} since {row['failing_since']}"
                        f" ({row['consecutive_failures']} failures)"
                        for row in failing
                    )
                )
                await asyncio.sleep(every_s)

        app[HEALTH].add_check(
            "notifications",
            lambda: health["text"],
            lambda: "degraded" if health["status"] == "degraded" else "healthy",
        )
        watcher = asyncio.create_task(watch_health(), name="notify-health")
        deliverer.start()
        try:
            yield
        finally:
            await cancel_and_wait(watcher)
            await deliverer.stop()

    return notify
