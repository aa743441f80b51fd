"""The POS work of one cloud process: sync job workers, the webhook applier, harvest pushes and
the scheduled incremental sync. Every loop polls the database (several processes share the work
through it) and is woken early when this process queued something. Supervised: a failure is
logged and retried after a pause; cancellation always propagates."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from cloud.services.pos.harvests import HarvestPusher
from cloud.services.pos.jobs import enqueue
from cloud.services.pos.links import ProviderLinks
from cloud.services.pos.secrets import PosSecrets
from cloud.services.pos.sync_runner import JobPolicy, SyncRunner
from cloud.services.pos.webhook_apply import WebhookApplier
from cloud.store import pos_jobs
from cloud.store.db import Database
from farmkit.tasks import cancel_and_wait

__all__ = ["PosBackground", "PosWorkPolicy"]

log = logging.getLogger(__name__)

_EVENTS_SETTLE_S = 0.05


@dataclass(frozen=True)
class PosWorkPolicy:
    """How much POS work this process does and how often it looks for it."""

    job_workers: int = 2
    poll_s: float = 1.0
    schedule_interval_s: float = 900.0
    jobs: JobPolicy = field(default_factory=JobPolicy)


class PosBackground:
    """Owns the background tasks; :meth:`start` then :meth:`stop`."""

    def __init__(
        self,
        db: Database,
        secrets: PosSecrets,
        links: ProviderLinks,
        policy: PosWorkPolicy,
    ) -> None:
        self.worker_id = uuid.uuid4()
        self._db = db
        self._policy = policy
        self._runner = SyncRunner(db, secrets, links, self.worker_id, policy.jobs)
        self._applier = WebhookApplier(db)
        self._pusher = HarvestPusher(db, secrets, links)
        # One wake-up per kind of work: an incoming event must not send every job worker to
        # the database, nor a queued job the webhook applier.
        self._jobs_queued = asyncio.Event()
        self._events_stored = asyncio.Event()
        self._harvests_due = asyncio.Event()  # nothing in this process queues them: polled
        self._tasks: list[asyncio.Task[None]] = []

    def wake(self) -> None:
        """A job was queued by this process: look now rather than at the next poll."""
        self._jobs_queued.set()

    def wake_events(self) -> None:
        """A webhook event was stored by this process: apply it now."""
        self._events_stored.set()

    def start(self) -> None:
        """Start the loops."""
        loops: list[tuple[str, Callable[[], Awaitable[bool]], asyncio.Event, float]] = [
            (f"pos-sync-{n}", self._runner.run_next, self._jobs_queued, 0.0)
            for n in range(self._policy.job_workers)
        ]
        loops += [
            # Events come in bursts: a moment's wait applies many in one transaction.
            ("pos-webhooks", self._apply_events, self._events_stored, _EVENTS_SETTLE_S),
            ("pos-harvests", self._pusher.push_next, self._harvests_due, 0.0),
        ]
        for name, work, wakeup, settle_s in loops:
            task = asyncio.create_task(self._loop(name, work, wakeup, settle_s), name=name)
            self._tasks.append(task)
        if self._policy.schedule_interval_s > 0:
            self._tasks.append(asyncio.create_task(self._schedule(), name="pos-schedule"))

    async def stop(self) -> None:
        """Cancel the loops and wait for them (a job in flight resumes elsewhere or later)."""
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(*tasks)

    async def _apply_events(self) -> bool:
        return await self._applier.apply_pending() > 0

    async def _loop(
        self,
        name: str,
        work: Callable[[], Awaitable[bool]],
        wakeup: asyncio.Event,
        settle_s: float,
    ) -> None:
        pause = self._policy.poll_s
        while True:
            try:
                if await work():
                    pause = self._policy.poll_s
                    continue  # more may be due
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; retrying", name)
                pause = min(60.0, pause * 2)
                await asyncio.sleep(pause)
                continue
            await self._idle(wakeup, self._policy.poll_s)
            if settle_s:
                await asyncio.sleep(settle_s)

    async def _idle(self, wakeup: asyncio.Event, seconds: float) -> None:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for returns a wake-up that comes in
        # the same turn of the loop as a cancellation and drops the cancellation, so a stop
        # waited for ever on a loop woken by the last webhook event before shutdown.
        try:
            async with asyncio.timeout(seconds):
                await wakeup.wait()
        except TimeoutError:
            return
        # Several job workers share their event: clear it a moment later so each of them sees it.
        await asyncio.sleep(0)
        wakeup.clear()

    async def _schedule(self) -> None:
        """Queue an incremental 'all' sync for each active configuration when it is due."""
        check_s = min(60.0, self._policy.schedule_interval_s)
        while True:
            try:
                async with self._db.as_system() as conn:
                    for due in await pos_jobs.owners_due_for_schedule(
                        conn, self._policy.schedule_interval_s
                    ):
                        await enqueue(conn, due["config_id"], due["owner_id"], "all", "schedule")
                        self.wake()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("POS schedule failed; retrying")
            await asyncio.sleep(check_s)
