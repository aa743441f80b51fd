"""The watch of silent farms for the application's lifetime: every process runs it; the store
lets one notice each silence and one send each message."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.services.notify.watch import SilenceWatch, WatchPolicy
from cloud.settings import CloudSettings
from cloud.store.notify import CloudNotifyStore
from cloud.web.keys import DATABASE, SILENCE_WATCH
from cloud.wiring.mail import smtp_settings
from farmkit.secretbox import SecretBox
from integrations.notify import ContactSender

__all__ = ["notify_context"]


def notify_context(
    settings: CloudSettings, secret_box: Callable[[], SecretBox]
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Watch for silent agents and send what is queued."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        policy = WatchPolicy(
            silent_after_s=settings.notify_silent_after_s,
            poll_s=settings.notify_poll_s,
            batch=settings.notify_batch,
        )
        store = CloudNotifyStore(app[DATABASE], secret_box())
        sender = ContactSender(smtp_settings(settings), concurrency=policy.batch)
        watch = SilenceWatch(store, sender, policy)
        app[SILENCE_WATCH] = watch
        watch.start()
        try:
            yield
        finally:
            await watch.stop()

    return context
