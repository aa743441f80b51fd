"""The POS integration: its services into the app, its HTTP session and background work as a
``cleanup_ctx`` (opened after the database, closed before it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import web

from cloud.pos_provider.client import RetryPolicy
from cloud.services.pos import (
    PosBackground,
    PosConfigService,
    PosJobService,
    PosReads,
    PosSecrets,
    PosWebhookReceiver,
    PosWorkPolicy,
    ProviderLinks,
)
from cloud.services.pos.links import ProviderUrls
from cloud.services.pos.sync_runner import JobPolicy
from cloud.settings import CloudSettings
from cloud.web.keys import DATABASE, POS_CONFIGS, POS_JOBS, POS_READS, POS_WEBHOOK
from farmkit.secretbox import SecretBox

__all__ = ["pos_context"]


def pos_context(
    settings: CloudSettings, secret_box: Callable[[], SecretBox]
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The cleanup context that builds and runs the POS integration."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        secrets = PosSecrets(secret_box())
        session = aiohttp.ClientSession(
            headers={"User-Agent": "farm-cloud"},
            connector=aiohttp.TCPConnector(limit=64),
        )
        links = ProviderLinks(
            session,
            ProviderUrls(sandbox=settings.pos_sandbox_url, production=settings.pos_production_url),
            RetryPolicy(
                attempts=settings.pos_retry_attempts,
                max_s=settings.pos_retry_max_s,
                timeout_s=settings.pos_request_timeout_s,
            ),
        )
        background = PosBackground(
            db,
            secrets,
            links,
            PosWorkPolicy(
                job_workers=settings.pos_job_workers,
                poll_s=settings.pos_poll_interval_s,
                schedule_interval_s=settings.pos_sync_interval_s,
                jobs=JobPolicy(lease_s=settings.pos_job_lease_s),
            ),
        )
        app[POS_CONFIGS] = PosConfigService(db, secrets, links)
        app[POS_JOBS] = PosJobService(db, background.wake)
        app[POS_READS] = PosReads(db)
        app[POS_WEBHOOK] = PosWebhookReceiver(db, secrets, background.wake_events)
        if settings.pos_job_workers > 0:
            background.start()
        try:
            yield
        finally:
            await background.stop()
            await session.close()

    return context
