"""Retention of the event log: events older than the configured age are deleted periodically."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from agent.services.events.log import EventLog

__all__ = ["EventRetention"]

log = logging.getLogger(__name__)

# The first run soon after start-up rather than a whole interval later (after downtime).
_FIRST_RUN_S = 60.0


class EventRetention:
    """Owns the task that prunes old events every ``interval_s``."""

    def __init__(self, events: EventLog, keep: timedelta, interval_s: float) -> None:
        self._events = events
        self._keep = keep
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start pruning periodically."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-retention")

    async def stop(self) -> None:
        """Stop pruning."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run_once(self) -> int:
        """Prune now; return how many events went."""
        # A run that overruns its interval is abandoned; the next one resumes the work.
        async with asyncio.timeout(max(self._interval, 60.0)):
            gone = await self._events.purge(self._keep)
        if gone:
            log.info("event retention deleted %d events", gone)
        return gone

    async def _run(self) -> None:
        await asyncio.sleep(min(_FIRST_RUN_S, self._interval))
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event retention failed; retrying at the next interval")
            await asyncio.sleep(self._interval)
