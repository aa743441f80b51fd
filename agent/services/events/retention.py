"""Retention of the event log: events older than the configured age are deleted periodically."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.services.events.log import EventLog
from agent.services.periodic import PeriodicJob

__all__ = ["EventRetention"]

log = logging.getLogger(__name__)

# The first run soon after start-up rather than a whole interval later (after downtime).
_FIRST_RUN_S = 60.0


class EventRetention:
    """Prunes old events every ``interval_s`` on the agent's scheduler."""

    def __init__(self, events: EventLog, keep: timedelta, interval_s: float) -> None:
        self._events = events
        self._keep = keep
        self._interval = interval_s
        self._job = PeriodicJob(
            "event-retention",
            self.run_once,
            interval_s=interval_s,
            first_after_s=min(_FIRST_RUN_S, interval_s),
        )

    async def start(self, scheduler: AsyncIOScheduler) -> None:
        """Start pruning periodically."""
        self._job.start(scheduler)

    async def stop(self) -> None:
        """Stop pruning."""
        await self._job.stop()

    async def run_once(self) -> int:
        """Prune now; return how many events went."""
        # A run that overruns its interval is abandoned; the next one resumes the work.
        async with asyncio.timeout(max(self._interval, 60.0)):
            gone = await self._events.purge(self._keep)
        if gone:
            log.info("event retention deleted %d events", gone)
        return gone
