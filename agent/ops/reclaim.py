"""Making room on a filling card, in an order that loses nothing the farm still needs.

Run when the room to write falls under the watermark (agent/ops/storage.py), step by step, each
deleting steps stopping once the room is back over it:

1. raw readings older than ``raw_after_days``: their 1-minute and hourly rollups, written in the
   same transaction as each raw reading, stay (charts and reports over those times lose only
   their finest points);
2. settled webhook deliveries (delivered or failed: the log of what was sent, not a message
   still to send);
3. automatic backups but the newest, when they are on the database's file system;
4. the WAL: checkpointed and truncated (always, last: the deletions above went through it).

Never deleted: the outbox's unsent records, events, configuration, calibrations, pending
deliveries. SQLite does not shrink the database file on ``DELETE``: the pages freed go on its
free list and are reused by the next writes before the file grows, which is what a full card
needs (the room measured counts them). The file would shrink only with ``VACUUM`` (a copy of
the whole database: impossible on a full card) or ``auto_vacuum=INCREMENTAL``, which the agent's
database does not use.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from agent.ops.backup import prune_backups
from agent.store.db import Database
from agent.store.readings import ReadingStore, Resolution
from agent.store.space import out_of_space
from farmkit.throttled_log import ThrottledLog
from integrations.webhooks.agent_side.store import WebhookStore
from protocol.timefmt import utcnow

__all__ = ["Freed", "Reclaimer"]

log = logging.getLogger(__name__)

_DAY_MS = 86_400_000
_CHUNK = 5000


@dataclass(frozen=True, slots=True)
class Freed:
    """What one step freed: bytes, and the rows or files it deleted."""

    step: str
    bytes: int
    items: int
    what: str


class Reclaimer:
    """Frees space in the stated order (see the module's docstring)."""

    def __init__(
        self,
        db: Database,
        *,
        raw_after_days: float,
        backup_dir: Path | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._readings = ReadingStore(db)
        self._webhooks = WebhookStore(db)
        self._raw_after_ms = round(raw_after_days * _DAY_MS)
        self._backup_dir = backup_dir
        self._clock = clock
        self._problems = ThrottledLog(log)

    async def run(self, enough: Callable[[], Awaitable[bool]]) -> list[Freed]:
        """Free space step by step until ``enough()``; what each step that freed some freed."""
        freed: list[Freed] = []
        steps = (self._raw_readings, self._settled_deliveries, self._old_backups)
        for step in steps:
            if await enough():
                break
            done = await self._guarded(step)
            if done is not None and done.items:
                freed.append(done)
        done = await self._guarded(self._wal)
        if done is not None and done.bytes:
            freed.append(done)
        return freed

    async def _guarded(self, step: Callable[[], Awaitable[Freed]]) -> Freed | None:
        """Run a step; on a card too full even to delete, the next step may still free some."""
        try:
            return await step()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            if not out_of_space(err):
                raise
            name = step.__name__.strip("_")
            self._problems.warning(name, "freeing space: %s could not run: %s", name, err)
            return None

    async def _raw_readings(self) -> Freed:
        before = round(self._clock() * 1000) - self._raw_after_ms
        rows = await self._pages_freed(
            lambda: self._readings.delete_chunk(Resolution.RAW, before, _CHUNK)
        )
        days = self._raw_after_ms / _DAY_MS
        return Freed("raw_readings", rows[1], rows[0], f"raw readings older than {days:g} days")

    async def _settled_deliveries(self) -> Freed:
        cutoff = utcnow() + timedelta(seconds=1)
        rows = await self._pages_freed(lambda: self._webhooks.prune(cutoff, _CHUNK))
        return Freed("webhook_deliveries", rows[1], rows[0], "settled webhook deliveries")

    async def _pages_freed(self, chunk: Callable[[], Awaitable[int]]) -> tuple[int, int]:
        """Run ``chunk`` until it deletes no more; (rows deleted, bytes of pages freed)."""
        first = await self._db.size()
        rows = 0
        while (deleted := await chunk()) > 0:
            rows += deleted
        last = await self._db.size()
        return rows, max(0, last.free_pages - first.free_pages) * last.page_size

    async def _old_backups(self) -> Freed:
        folder = self._backup_dir
        if folder is None or not await asyncio.to_thread(_same_disk, folder, self._db.path):
            return Freed("backups", 0, 0, "automatic backups but the newest")
        sizes = await asyncio.to_thread(_backup_sizes, folder)
        gone = await asyncio.to_thread(prune_backups, folder, 1)
        total = sum(sizes.get(path, 0) for path in gone)
        return Freed("backups", total, len(gone), "automatic backups but the newest")

    async def _wal(self) -> Freed:
        wal = self._db.path.with_name(self._db.path.name + "-wal")
        before = await asyncio.to_thread(_size, wal)
        await self._db.checkpoint()
        after = await asyncio.to_thread(_size, wal)
        return Freed("wal", max(0, before - after), 1, "the WAL, checkpointed and truncated")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _same_disk(folder: Path, database: Path) -> bool:
    """Whether deleting in ``folder`` gives room to ``database``."""
    try:
        return os.stat(folder).st_dev == os.stat(database).st_dev
    except FileNotFoundError:
        return False


def _backup_sizes(folder: Path) -> dict[Path, int]:
    return {
        path: _size(path) + _size(path.with_name(path.name + ".sha256"))
        for path in folder.iterdir()
    }
