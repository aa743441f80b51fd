"""Background upkeep of a long-running agent: free disk space, WAL checkpoints, daily backups.

Low disk space is reported before writes fail: in /healthz (``disk``) and as a ``disk_low``
event when free space falls under the watermark (``disk_ok`` when it recovers).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from agent.ops.backup import BackupError, create_backup, prune_backups
from agent.store.db import Database
from protocol.tasks import cancel_and_wait

__all__ = ["Maintenance", "MaintenancePolicy", "Notify"]

log = logging.getLogger(__name__)

Notify = Callable[[str, str, str, dict[str, object]], Awaitable[None]]
"""(kind, severity, message, data) for the event log."""


@dataclass(frozen=True)
class MaintenancePolicy:
    """How often each chore runs, and the free-disk watermark."""

    disk_low_free_bytes: int
    disk_check_interval_s: float
    checkpoint_interval_s: float
    backup_dir: Path | None
    backup_interval_s: float
    backup_keep: int


class Maintenance:
    """Owns one task that checks the disk, checkpoints the WAL and takes automatic backups."""

    def __init__(
        self,
        db: Database,
        state_dir: Path,
        policy: MaintenancePolicy,
        notify: Notify,
        *,
        version: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._state_dir = state_dir
        self._policy = policy
        self._notify = notify
        self._version = version
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.free_bytes: int | None = None
        self.disk_low = False
        self.last_backup: str | None = None
        self.last_checkpoint_pages = 0

    def disk_check(self) -> str:
        """The /healthz line for the state directory's file system."""
        if self.free_bytes is None:
            return "unknown"
        state = "low" if self.disk_low else "ok"
        return f"{state} ({self.free_bytes // (1024 * 1024)} MiB free)"

    async def start(self) -> None:
        """Check the disk now, then keep at it."""
        await self.check_disk()
        self._task = asyncio.create_task(self._run(), name="maintenance")

    async def stop(self) -> None:
        """Stop the chores."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def check_disk(self) -> None:
        """Measure free space and report crossing the watermark (either way) once."""
        usage = await asyncio.to_thread(shutil.disk_usage, self._state_dir)
        self.free_bytes = usage.free
        low = usage.free < self._policy.disk_low_free_bytes
        if low == self.disk_low:
            return
        self.disk_low = low
        data: dict[str, object] = {
            "free_bytes": usage.free,
            "watermark_bytes": self._policy.disk_low_free_bytes,
        }
        if low:
            log.warning("low disk space: %d bytes free in %s", usage.free, self._state_dir)
            await self._notify(
                "disk_low", "warning", f"Low disk space: {usage.free // 1048576} MiB free", data
            )
        else:
            log.info("disk space recovered: %d bytes free", usage.free)
            await self._notify("disk_ok", "info", "Disk space recovered", data)

    async def checkpoint(self) -> None:
        """Checkpoint and truncate the WAL."""
        busy, pages, _ = await self._db.checkpoint()
        self.last_checkpoint_pages = pages
        if busy:
            log.info("WAL checkpoint could not finish (readers busy); retrying next time")

    async def backup_now(self) -> None:
        """Take an automatic backup and keep the newest ``backup_keep``."""
        folder = self._policy.backup_dir
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            result = await asyncio.to_thread(
                create_backup,
                self._state_dir,
                self._db.path,
                folder,
                version=self._version,
            )
            await asyncio.to_thread(prune_backups, folder, self._policy.backup_keep)
        except (BackupError, OSError) as err:
            log.error("automatic backup failed: %s", err)
            await self._notify("backup_failed", "error", f"Automatic backup failed: {err}", {})
            return
        self.last_backup = result.path.name
        log.info("automatic backup written to %s", result.path)

    async def _run(self) -> None:
        policy = self._policy
        due = {"disk": policy.disk_check_interval_s, "wal": policy.checkpoint_interval_s}
        if policy.backup_dir is not None:
            due["backup"] = policy.backup_interval_s
        chores = {"disk": self.check_disk, "wal": self.checkpoint, "backup": self.backup_now}
        started = self._clock()
        next_at = {name: started + interval for name, interval in due.items()}
        while True:
            name = min(next_at, key=next_at.__getitem__)
            await asyncio.sleep(max(0.0, next_at[name] - self._clock()))
            try:
                await chores[name]()
            except asyncio.CancelledError:
                raise
            except Exception:  # supervised: log, and try again next interval
                log.exception("maintenance chore %s failed", name)
            next_at[name] = self._clock() + due[name]
