"""The readings side of the running agent: the writer's commit task, the scheduled fold of
staged readings into the bucketed tables (whole time buckets, a minute after each ends),
scheduled retention, and what committed readings tell
calibration (the latest raw value). Devices' ``last_reading`` is stamped by the reading store
(at the fold when it stages).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.services.periodic import PeriodicJob
from agent.services.readings.listeners import CommittedReading, ReadingSubscription
from agent.services.readings.retention import ReadingRetention
from agent.services.readings.writer import ReadingWriter
from agent.store.readings import BUCKET_MS
from farmkit.tasks import cancel_and_wait
from protocol.records import record

__all__ = ["LatestReadings", "ReadingRuntime"]

log = logging.getLogger(__name__)

# Readings older than this are not offered as "the raw value now" to a calibration.
_LATEST_RAW_MAX_AGE_MS = 5 * 60 * 1000
_RECORDER_QUEUE = 50_000
# How often the stage's size and the clock are checked for a fold.
_FOLD_CHECK_S = 10.0
# A fold runs this long after a time bucket ends: a message stamped just before the boundary
# that arrives a little late is still folded with its bucket, not into it later.
FOLD_GRACE_MS = 60_000


@record
class _Latest:
    ts: int
    raw: float


class LatestReadings:
    """The newest committed raw value per series, in memory (calibration's ``LatestRaw``)."""

    def __init__(self, now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self._latest: dict[tuple[str, str], _Latest] = {}
        self._now_ms = now_ms

    def observe(self, reading: CommittedReading) -> None:
        """Remember a committed reading if it is the series' newest."""
        key = (reading.device_id, reading.metric)
        known = self._latest.get(key)
        if known is None or reading.ts >= known.ts:
            raw = reading.value if reading.raw is None else reading.raw
            self._latest[key] = _Latest(reading.ts, raw)

    def forget(self, device_id: str) -> None:
        """Drop a removed device's values."""
        for key in [key for key in self._latest if key[0] == device_id]:
            del self._latest[key]

    async def latest_raw(self, device_id: str, metric: str) -> float | None:
        """The newest raw value of the series if it is recent enough to calibrate with."""
        known = self._latest.get((device_id, metric))
        if known is None or self._now_ms() - known.ts > _LATEST_RAW_MAX_AGE_MS:
            return None
        return known.raw


class ReadingRuntime:
    """Owns the writer's task, the retention schedule and the committed-readings recorder."""

    def __init__(
        self,
        writer: ReadingWriter,
        retention: ReadingRetention,
        *,
        retention_interval_s: float,
        fold: Callable[..., Awaitable[int]] | None = None,
        fold_interval_s: float = 0.0,
        stage_size: Callable[[], Awaitable[int]] | None = None,
        foldable: Callable[[], Awaitable[int]] | None = None,
        fold_rows: int = 200_000,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.writer = writer
        self.retention = retention
        self.latest = LatestReadings()
        self._interval = retention_interval_s
        # The first run soon after start-up, not a whole interval later (after downtime).
        self._retention_job = PeriodicJob(
            "reading-retention",
            self._prune,
            interval_s=retention_interval_s,
            first_after_s=min(60.0, retention_interval_s),
        )
        # Staged readings move to the bucketed tables a minute after each time bucket ends (the
        # store folds whole buckets), or every few buckets when fold_interval_s is longer; and
        # whenever fold_rows readings of buckets that have ended are staged (a backlog: reads
        # scan the stage, which has no index). The bucket under way is never folded early, so
        # its readings do not count: at 500 devices a half hour's trickle passed 200,000 and
        # started a fold that had nothing to move. The first check soon after start-up: what a
        # previous run staged.
        self._fold = fold
        self._stage_size = stage_size
        self._foldable = foldable
        self._fold_interval = fold_interval_s
        self._fold_rows = fold_rows
        self._now_ms = now_ms
        self._period_ms = BUCKET_MS * max(1, math.ceil(fold_interval_s * 1000 / BUCKET_MS))
        self._period: int | None = None
        """The period (of ``_period_ms``, a grace after its start) folded last."""
        self.folded = 0
        """Readings folded since start."""
        # An owned loop, not a scheduler job: a fold during a backlog's catch-up outlasts the
        # check interval, and the scheduler warned of every check it skipped meanwhile.
        self._folds = fold is not None and fold_interval_s > 0
        # The scheduled fold and the one before a sync catch-up never run at once: both would
        # move and queue the same staged rows.
        self._folding = asyncio.Lock()
        self._folder: asyncio.Task[None] | None = None
        self._subscription: ReadingSubscription | None = None
        self._recorder: asyncio.Task[None] | None = None

    async def start(self, scheduler: AsyncIOScheduler) -> None:
        """Start committing, recording, and pruning on the agent's scheduler."""
        await self.writer.start()
        self._subscription = self.writer.subscribe(maxsize=_RECORDER_QUEUE)
        self._recorder = asyncio.create_task(self._record(self._subscription), name="recorder")
        self._retention_job.start(scheduler)
        if self._folds:
            self._folder = asyncio.create_task(self._fold_loop(), name="reading-fold")

    async def stop(self) -> None:
        """Stop pruning, commit what is queued, then stop recording."""
        await self._retention_job.stop()
        if self._folder is not None:
            folder, self._folder = self._folder, None
            await cancel_and_wait(folder)
        await self.writer.stop()
        if self._recorder is not None:
            # The last batch's readings are in the queue: record them before stopping.
            await asyncio.sleep(0)
            recorder, self._recorder = self._recorder, None
            await cancel_and_wait(recorder)
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    async def prune_now(self) -> None:
        """Run retention once (the scheduled job)."""
        await self._prune()

    async def fold_now(self, *, whole_buckets: bool = True) -> int:
        """Fold the staged readings once (the scheduled job); how many moved. With
        ``whole_buckets`` false the bucket under way is folded too: before the uploader
        catches up after an outage, so the newest reading of every series is queued where
        the latest state is sent from first."""
        return await self._fold_now(whole_buckets=whole_buckets)

    async def staged(self) -> int:
        """Readings in the stage (0 when the store does not stage)."""
        return 0 if self._stage_size is None else await self._stage_size()

    async def _fold_loop(self) -> None:
        check = min(_FOLD_CHECK_S, self._fold_interval)
        while True:
            await asyncio.sleep(check)
            try:
                await self.fold_if_due()
            except Exception:  # supervised: the stage stays, the next check folds it
                log.exception("folding staged readings failed")

    def _current_period(self) -> int:
        return (self._now_ms() - FOLD_GRACE_MS) // self._period_ms

    async def fold_if_due(self) -> None:
        """One check of the fold loop: fold if a time bucket (or ``fold_interval_s`` of them)
        ended a minute ago or more since the last fold, or ``fold_rows`` readings of buckets
        that have ended are staged (the first check always folds: what a previous run
        staged)."""
        if self._current_period() != self._period or (
            self._foldable is not None and await self._foldable() >= self._fold_rows
        ):
            await self._fold_now()

    async def _fold_now(self, *, whole_buckets: bool = True) -> int:
        if self._fold is None:
            return 0
        async with self._folding:
            began = time.perf_counter()
            self._period = self._current_period()
            folded = await self._fold(whole_buckets=whole_buckets)
        self.folded += folded
        if folded:
            log.debug("folded %d staged readings in %.2f s", folded, time.perf_counter() - began)
        return folded

    async def _prune(self) -> None:
        try:
            # A run that overruns its interval is abandoned; the next one resumes the work.
            async with asyncio.timeout(max(self._interval, 60.0)):
                await self.retention.run()
        except TimeoutError:
            log.warning("reading retention did not finish within its interval")

    async def _record(self, subscription: ReadingSubscription) -> None:
        # The devices' last_reading is stamped in each batch's own transaction (ReadingStore).
        while True:
            reading: CommittedReading | None = await subscription.get()
            while reading is not None:
                self.latest.observe(reading)
                reading = subscription.get_nowait()
