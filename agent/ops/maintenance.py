"""Background upkeep of a long-running agent: the room to write, WAL checkpoints, daily backups.

The room is checked every ``disk_check_interval_s`` (every few seconds while it is low or
full): agent/ops/storage.py reports it and frees space under the watermark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.ops.backup import BackupError, create_backup, prune_backups
from agent.ops.storage import Notify, StorageWatch
from agent.store.db import Database
from farmkit.tasks import cancel_and_wait

__all__ = ["Maintenance", "MaintenancePolicy", "Notify"]

log = logging.getLogger(__name__)

# While the room is low or full, it is checked this often at least: the state (and the freeing
# of space) follows the card within seconds.
_PRESSED_INTERVAL_S = 5.0


@dataclass(frozen=True)
class MaintenancePolicy:
    """How often each chore runs."""

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
        storage: StorageWatch,
        *,
        version: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._state_dir = state_dir
        self._policy = policy
        self._notify = notify
        self.storage = storage
        self._version = version
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.last_backup: str | None = None
        self.last_checkpoint_pages = 0

    async def start(self) -> None:
        """Check the disk now, then keep at it."""
        await self.check_disk()
        self._task = asyncio.create_task(self._run(), name="maintenance")

    async def stop(self) -> None:
        """Stop the chores."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def check_disk(self) -> None:
        """Measure the room to write, free space under the watermark, report a change."""
        await self.storage.check()

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
            interval = due[name]
            if name == "disk" and self.storage.level != "ok":
                interval = min(interval, _PRESSED_INTERVAL_S)
            next_at[name] = self._clock() + interval
