"""The cloud link: uploads the outbox and applies the identity delta while paired."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.web.keys import SYNC
from agent.wiring.context import CleanupContext

__all__ = ["sync_context"]


def sync_context() -> CleanupContext:
    """Run the sync loop for the application's lifetime (it idles while unpaired)."""

    async def cloud_sync(app: web.Application) -> AsyncIterator[None]:
        app[SYNC].start()
        yield
        await app[SYNC].stop()

    return cloud_sync
