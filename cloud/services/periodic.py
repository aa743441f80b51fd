"""Periodic jobs run once per period across all cloud processes (cloud/store/jobs.py).

Every process checks each job every ``check_s``; whichever claims the period runs it. A job
that fails is recorded with its error and runs again at its next period; a database that does
not answer is retried with back-off (a PostgreSQL restart is survived). Cancellation always
propagates.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cloud.store import jobs
from cloud.store.db import Database
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait

__all__ = ["PeriodicJob", "PeriodicJobs"]

log = logging.getLogger(__name__)

_BACKOFF = Backoff(initial=1.0, maximum=60.0)


@dataclass(frozen=True)
class PeriodicJob:
    """What to run (idempotent) and how often, over all processes together."""

    name: str
    interval_s: float
    run: Callable[[], Awaitable[object]]


class PeriodicJobs:
    """Owns the loop that claims and runs due jobs; :meth:`check_once`, :meth:`start`,
    :meth:`stop`."""

    def __init__(self, db: Database, jobs_: list[PeriodicJob], check_s: float = 30.0) -> None:
        self.worker = f"{uuid.uuid4().hex[:12]}"
        self._db = db
        self._jobs = jobs_
        self._check_s = check_s
        self._task: asyncio.Task[None] | None = None

    async def check_once(self) -> list[str]:
        """Run every job this process claims now; the names of those it ran."""
        ran = []
        for job in self._jobs:
            async with self._db.as_system() as conn:
                claimed = await jobs.claim_run(conn, job.name, job.interval_s, self.worker)
            if not claimed:
                continue
            error = None
            try:
                await job.run()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a job's failure is recorded; the next period retries
                log.exception("periodic job %s failed", job.name)
                error = f"{type(err).__name__}: {err}"[:1000]
            async with self._db.as_system() as conn:
                await jobs.finish_run(conn, job.name, error)
            ran.append(job.name)
        return ran

    def start(self) -> None:
        """Start checking in the background."""
        self._task = asyncio.create_task(self._loop(), name="periodic-jobs")

    async def stop(self) -> None:
        """Stop checking; a job in flight is cancelled and runs again at its next period."""
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        retry = Retry(_BACKOFF)
        while True:
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = retry.next_delay()
                log.warning("periodic jobs: database unavailable; retrying in %.0f s", delay)
                await asyncio.sleep(delay)
                continue
            retry.reset()
            await asyncio.sleep(self._check_s)
