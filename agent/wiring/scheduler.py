"""The agent's one scheduler: every timed job (retention, schedules, checks) runs on it.

Started before the capabilities and shut down after them; each capability adds its jobs when it
starts and removes them when it stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.wiring.context import CleanupContext

__all__ = ["SCHEDULER", "scheduler_context"]

SCHEDULER = web.AppKey("scheduler", AsyncIOScheduler)


def scheduler_context() -> CleanupContext:
    """Run one AsyncIOScheduler on the application's event loop for its lifetime."""

    async def scheduler(app: web.Application) -> AsyncIterator[None]:
        # Triggers that depend on the farm's time zone carry it (schedule windows); UTC otherwise.
        jobs = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
        jobs.start()
        app[SCHEDULER] = jobs
        yield
        jobs.shutdown(wait=False)

    return scheduler
