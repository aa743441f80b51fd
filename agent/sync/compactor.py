"""Keeps the outbox within its byte cap and the disk above its free-space watermark, in tiers
(docs/design.md section 8): the oldest queued raw readings become 1-minute rollups; when those no
longer fit, the oldest 1-minute rollups become 1-hour rollups. Events, configuration and
calibrations are never dropped. Staged readings count toward the cap but are not rolled up
where they are: the stage holds at most a fold's worth, and the fold queues those the cloud has
not acknowledged in ``outbox_readings``, where the oldest are rolled up first.

It checks the running totals every ``check_interval_s`` (one row read), so the cap holds while
readings arrive, whether or not the cloud is reachable. Each step is one aggregate statement
inside SQLite over a bounded range, in its own short transaction: ingest and commands wait for
one step at most, and no reading passes through Python.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.store.space import out_of_space
from agent.sync.outbox import COUNT_IN_ROWS, OutboxStore
from agent.sync.outbox_rows import Compaction
from farmkit.throttled_log import ThrottledLog

__all__ = ["Compactor", "OutboxBounds"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutboxBounds:
    """The outbox's limits and the compactor's pacing."""

    max_bytes: int
    min_free_disk_bytes: int
    check_interval_s: float = 1.0
    step_rows: int = 5_000
    """Rows one step folds: a short transaction (a few tens of milliseconds on a Pi 4)."""
    low_water: float = 0.9
    """Over the cap, compact down to this share of it, so steps do not run on every check."""


class Compactor:
    """Owns the compaction loop."""

    def __init__(
        self,
        outbox: OutboxStore,
        bounds: OutboxBounds,
        state_dir: Path,
        *,
        free_disk: Callable[[Path], int] | None = None,
    ) -> None:
        self._outbox = outbox
        self._bounds = bounds
        self._state_dir = state_dir
        self._free_disk = free_disk or (lambda path: shutil.disk_usage(path).free)
        self._full_logged = False
        self._problems = ThrottledLog(log)

    async def run(self) -> None:
        """Check and compact until cancelled; a failure is logged and the loop goes on."""
        while True:
            try:
                await self.enforce()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # supervised
                if not out_of_space(err):
                    log.exception("outbox compaction failed; trying again")
                else:  # it writes too: it waits for room like every writer (no traceback)
                    self._problems.warning("full", "outbox compaction waits for room: %s", err)
            await asyncio.sleep(self._bounds.check_interval_s)

    async def excess(self) -> int:
        """Bytes to free now: over the cap (down to the low water mark), or what the disk is
        short of its watermark."""
        figures = await self._outbox.figures()
        if self._outbox.uncounted > COUNT_IN_ROWS:  # an outage: keep the next check cheap
            await self._outbox.count_in()
        bounds = self._bounds
        excess = 0
        if figures.bytes > bounds.max_bytes:
            excess = figures.bytes - int(bounds.max_bytes * bounds.low_water)
        free = await asyncio.to_thread(self._free_disk, self._state_dir)
        if free < bounds.min_free_disk_bytes:
            excess = max(excess, bounds.min_free_disk_bytes - free, figures.bytes // 10)
        return min(excess, figures.bytes)

    async def enforce(self) -> int:
        """Compact, one short step at a time, until the excess is gone or nothing more can be
        folded; return the bytes freed."""
        excess = await self.excess()
        freed = 0
        while freed < excess:
            step = await self._outbox.roll_up_readings(self._bounds.step_rows)
            # A sparse series can make a raw step free nothing (a minute of one reading becomes
            # one rollup); folding minutes into hours always frees.
            if step.replaced == 0 or step.freed_bytes <= 0:
                hours = await self._outbox.roll_up_minutes(self._bounds.step_rows)
                step = Compaction(
                    step.replaced + hours.replaced, step.freed_bytes + hours.freed_bytes
                )
            if step.replaced == 0:
                if not self._full_logged:
                    log.error("outbox over its bounds with nothing left to fold into rollups")
                    self._full_logged = True
                break
            freed += step.freed_bytes
            await asyncio.sleep(0)  # let ingest and commands take the write lock between steps
        if freed:
            self._full_logged = False
            log.info("outbox compacted: %d bytes folded into rollups", freed)
        return freed
