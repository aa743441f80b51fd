"""The room the agent has to write, what it does under the watermark, and how it says so.

The room is what new writes can still take: free space on the state directory's file system
plus the free pages inside the database (SQLite reuses them before it grows the file), or the
room under ``database_max_bytes`` when that is less. Three states:

- ``ok``;
- ``low``: the room is under ``disk_low_free_bytes``: /healthz ``degraded``, a ``disk_low``
  warning event, and space is freed (agent/ops/reclaim.py), each step a ``storage_reclaimed``
  event with what it freed;
- ``full``: the storage refuses writes for lack of space (the database says so after any
  refused write, the reading writer while it retries its batch): /healthz ``unhealthy`` with
  why and since when, and a ``disk_full`` critical event. Nothing is lost meanwhile: readings
  wait in the broker, the event log and the outbox retry their writes, requests that would
  write are answered 503 ``STORAGE_FULL``.

The systemd watchdog keeps being pinged through all of it: the event loop and the reading
writer are alive, and a restart would not make room.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from agent.ops.reclaim import Reclaimer
from agent.store.db import Database, DatabaseSize
from protocol.timefmt import iso

__all__ = ["Notify", "Room", "StorageWatch"]

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
# A step that frees space again and again (the WAL, at every check while the room is low) is an
# event at most this often, with what it freed since the last one; the log says each time.
_EVENT_INTERVAL_S = 600.0

Notify = Callable[[str, str, str, dict[str, object]], Awaitable[None]]
"""(kind, severity, message, data) for the event log."""

Level = Literal["ok", "low", "full"]
Status = Literal["healthy", "degraded", "unhealthy"]
_STATUS: dict[Level, Status] = {"ok": "healthy", "low": "degraded", "full": "unhealthy"}


@dataclass(frozen=True, slots=True)
class Room:
    """Free space on the file system and inside the database."""

    disk_free: int
    database: DatabaseSize

    @property
    def free(self) -> int:
        """Bytes new writes can still take."""
        return max(0, min(self.disk_free + self.database.reusable, self.database.room_under_cap))


class StorageWatch:
    """Measures the room, frees space under the watermark, and reports the state."""

    def __init__(
        self,
        db: Database,
        state_dir: Path,
        *,
        watermark: int,
        reclaimer: Reclaimer,
        notify: Notify,
        stalled: Callable[[], float | None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._state_dir = state_dir
        self._watermark = watermark
        self._reclaimer = reclaimer
        self._notify = notify
        self._stalled = stalled
        self._clock = clock
        self.room: Room | None = None
        self.level: Level = "ok"
        """The state the last check reported (events go out when it changes)."""
        self._full_since: float | None = None
        self._told: dict[str, float] = {}
        self._untold: dict[str, tuple[int, int]] = {}

    @property
    def free_bytes(self) -> int | None:
        """The room at the last check."""
        return None if self.room is None else self.room.free

    def refusing(self) -> str | None:
        """Why the storage refuses writes right now, or None."""
        stalled = self._stalled()
        refused = self._db.refused
        if refused is None and stalled is None:
            self._full_since = None
            return None
        if self._full_since is None:
            self._full_since = stalled if stalled is not None else self._clock()
        # A small write may fit in a free page while the readings' batch does not: the
        # database's last refusal stays the reason while the writer retries.
        return refused or self._db.last_refusal or "writes refused for lack of space"

    def now(self) -> Level:
        """The state now: full as soon as a write is refused, low by the last measure."""
        if self.refusing() is not None:
            return "full"
        free = self.free_bytes
        return "low" if free is not None and free < self._watermark else "ok"

    def status(self) -> Status:
        """What the state means for /healthz."""
        return _STATUS[self.now()]

    def check_line(self) -> str:
        """The /healthz ``disk`` check."""
        free = self.free_bytes
        if free is None:
            return "unknown"
        mib = f"{free // _MIB} MiB free"
        why = self.refusing()
        if why is not None:
            since = iso(datetime.fromtimestamp(self._full_since or self._clock(), UTC))
            return f"full (writes refused since {since}: {why}; {mib})"
        if free < self._watermark:
            return f"low ({mib}, under the {self._watermark // _MIB} MiB watermark)"
        return f"ok ({mib})"

    async def measure(self) -> Room:
        """Measure the room now."""
        usage = await asyncio.to_thread(shutil.disk_usage, self._state_dir)
        self.room = Room(usage.free, await self._db.size())
        return self.room

    async def check(self) -> None:
        """Measure; under the watermark free space; report a change of state once."""
        room = await self.measure()
        if room.free < self._watermark or self.refusing() is not None:
            for freed in await self._reclaimer.run(self._enough):
                await self._reclaimed(freed.step, freed.bytes, freed.items, freed.what)
            room = await self.measure()
        level = self.now()
        if level == self.level:
            return
        self.level = level
        data: dict[str, object] = {"free_bytes": room.free, "watermark_bytes": self._watermark}
        free = f"{room.free // _MIB} MiB free"
        if level == "full":
            why = self.refusing()
            log.error("storage full: writes refused (%s); %s", why, free)
            data["error"] = why
            await self._notify(
                "disk_full",
                "critical",
                f"Storage full: writes refused ({why}); readings wait in the broker",
                data,
            )
        elif level == "low":
            log.warning("low disk space: %s in %s", free, self._state_dir)
            await self._notify("disk_low", "warning", f"Low disk space: {free}", data)
        else:
            log.info("disk space recovered: %s", free)
            await self._notify("disk_ok", "info", "Disk space recovered", data)

    async def _enough(self) -> bool:
        return (await self.measure()).free >= self._watermark

    async def _reclaimed(self, step: str, freed: int, items: int, what: str) -> None:
        log.warning("freed %d bytes for new writes: %s (%d)", freed, what, items)
        before_bytes, before_items = self._untold.pop(step, (0, 0))
        freed, items = freed + before_bytes, items + before_items
        now = self._clock()
        if now - self._told.get(step, -_EVENT_INTERVAL_S) < _EVENT_INTERVAL_S:
            self._untold[step] = (freed, items)
            return
        self._told[step] = now
        await self._notify(
            "storage_reclaimed",
            "warning",
            f"Freed {freed // 1024} KiB: {what}",
            {"step": step, "freed_bytes": freed, "items": items},
        )
