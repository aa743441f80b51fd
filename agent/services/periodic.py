"""A periodic job on the agent's one scheduler (built in agent/wiring/scheduler.py).

The component that owns the job adds it when it starts and removes it when it stops; a run still
in progress is cancelled then, so nothing of a stopped component runs on. A run that fails is
logged and the job runs again at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from farmkit.tasks import cancel_and_wait

__all__ = ["PeriodicJob"]

log = logging.getLogger(__name__)


class PeriodicJob:
    """``work`` every ``interval_s`` seconds, first ``first_after_s`` seconds after start."""

    def __init__(
        self,
        job_id: str,
        work: Callable[[], Awaitable[object]],
        *,
        interval_s: float,
        first_after_s: float,
    ) -> None:
        self.job_id = job_id
        self._work = work
        self._interval = interval_s
        self._first_after = first_after_s
        self._job: Job | None = None
        self._running: set[asyncio.Task[object]] = set()

    def start(self, scheduler: AsyncIOScheduler) -> None:
        """Add the job (one run at a time; runs missed while busy or down are merged)."""
        self._job = scheduler.add_job(
            self._run,
            "interval",
            seconds=self._interval,
            id=self.job_id,
            name=self.job_id,
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC) + timedelta(seconds=self._first_after),
        )

    async def stop(self) -> None:
        """Remove the job and cancel a run in progress."""
        if self._job is not None:
            with contextlib.suppress(JobLookupError):
                self._job.remove()
            self._job = None
        running = list(self._running)
        await cancel_and_wait(*running)

    async def _run(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            await self._work()
        except asyncio.CancelledError:
            if self._job is not None:
                raise
            # Cancelled by stop(): end quietly (apscheduler would log it as a failed job).
        except Exception:
            log.exception("%s failed; retrying at the next interval", self.job_id)
        finally:
            if task is not None:
                self._running.discard(task)
