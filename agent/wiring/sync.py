"""The cloud link: uploads the outbox and applies the identity delta while paired."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from aiohttp import web

from agent.services.events.log import EventLog
from agent.store.farms import FarmStore
from agent.sync.uploader import StuckAlert, SyncStatus
from agent.web.keys import READINGS, SYNC
from agent.wiring.context import CleanupContext
from protocol.timefmt import iso

__all__ = ["stuck_sync_alert", "sync_context"]


def stuck_sync_alert(farms: FarmStore, events: EventLog) -> StuckAlert:
    """An alert event on every farm when the cloud keeps refusing the agent's batches."""

    async def alert(status: SyncStatus) -> None:
        since = iso(datetime.fromtimestamp((status.stuck_since_ms or 0) / 1000, UTC))
        for farm_id in await farms.ids():
            events.record(
                farm_id,
                None,
                "sync_stuck",
                "critical",
                f"Cloud sync stuck since {since}: {status.last_error}",
                {"since": since, "last_error": status.last_error, "failures": status.failures},
            )

    return alert


def sync_context() -> CleanupContext:
    """Run the sync loop for the application's lifetime (it idles while unpaired)."""

    async def cloud_sync(app: web.Application) -> AsyncIterator[None]:
        if READINGS in app:
            # The latest state is sent first after an outage from what the fold queued: fold
            # every staged reading first, the bucket under way too, so it goes up before the
            # backfill.
            app[SYNC].before_catch_up(
                functools.partial(app[READINGS].fold_now, whole_buckets=False)
            )
        app[SYNC].start()
        yield
        await app[SYNC].stop()

    return cloud_sync
