"""How long readings are kept at each resolution, and the job that prunes older ones.

Defaults (docs/design.md, section 6): raw 30 days, 1-minute rollups one year, hourly forever.
Pruning runs in small transactions so ingest never waits behind one large delete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.store.readings import ReadingStore, Resolution

__all__ = ["PruneReport", "ReadingRetention", "RetentionPolicy", "wall_ms"]

log = logging.getLogger(__name__)

_DAY_S = 86_400.0
# The largest timestamp a purge deletes below: every reading a device could have.
_ALL = 2**63 - 1


def wall_ms() -> int:
    """The current time in unix milliseconds."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Seconds to keep each resolution; None keeps it forever."""

    raw_s: float | None = 30 * _DAY_S
    minute_s: float | None = 365 * _DAY_S
    hour_s: float | None = None

    def retention_ms(self, resolution: Resolution) -> int | None:
        """How long a resolution is kept, in milliseconds (None: forever)."""
        seconds = {
            Resolution.RAW: self.raw_s,
            Resolution.MINUTE: self.minute_s,
            Resolution.HOUR: self.hour_s,
        }[resolution]
        return None if seconds is None else int(seconds * 1000)

    def horizon(self, resolution: Resolution, now_ms: int) -> int | None:
        """Rows of a resolution older than this are due for pruning (None: never)."""
        keep = self.retention_ms(resolution)
        return None if keep is None else now_ms - keep


@dataclass(frozen=True, slots=True)
class PruneReport:
    """Rows deleted per resolution by one run."""

    raw: int = 0
    minute: int = 0
    hour: int = 0

    @property
    def total(self) -> int:
        """Rows deleted at all resolutions."""
        return self.raw + self.minute + self.hour


class ReadingRetention:
    """Deletes readings past their retention, one bounded chunk per transaction."""

    def __init__(
        self,
        store: ReadingStore,
        policy: RetentionPolicy,
        *,
        chunk: int = 5000,
        now: Callable[[], int] = wall_ms,
    ) -> None:
        if chunk < 1:
            raise ValueError("chunk must be at least one row")
        self._store = store
        self.policy = policy
        self._chunk = chunk
        self._now = now

    async def run(self) -> PruneReport:
        """Prune every resolution once (call periodically, e.g. hourly)."""
        now = self._now()
        deleted: dict[Resolution, int] = {}
        for resolution in Resolution:
            horizon = self.policy.horizon(resolution, now)
            deleted[resolution] = 0 if horizon is None else await self._drain(resolution, horizon)
        report = PruneReport(
            deleted[Resolution.RAW], deleted[Resolution.MINUTE], deleted[Resolution.HOUR]
        )
        if report.total:
            log.info(
                "pruned readings: %d raw, %d 1-minute, %d hourly",
                report.raw,
                report.minute,
                report.hour,
            )
        return report

    async def purge_device(self, device_id: str) -> int:
        """Delete a device's readings in chunks, so deleting the device itself is quick.

        The foreign-key cascade would do the same in one transaction, which for a sensor with a
        year of data holds the writer for seconds on an SD card.
        """
        return sum(
            [
                await self._drain(resolution, _ALL, device_id)
                for resolution in (Resolution.RAW, Resolution.MINUTE, Resolution.HOUR)
            ]
        )

    async def _drain(
        self, resolution: Resolution, before: int, device_id: str | None = None
    ) -> int:
        total = 0
        while True:
            # Each chunk is one write of its own: requests' writes queued meanwhile commit first,
            # and ingest goes on between two chunks.
            deleted = await self._store.delete_chunk(resolution, before, self._chunk, device_id)
            total += deleted
            if deleted < self._chunk:
                return total
