"""Readings' partitions and retention, run by the maintenance job (cloud/wiring/maintenance.py):
partitions are made months ahead, so a batch never waits for one, and raw readings older than
the retention are dropped a month at a time; their minute and hour rollups stay."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from cloud.store import partitions
from cloud.store.db import Database
from protocol.timefmt import utcnow

__all__ = ["ReadingRetention", "RetentionPolicy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionPolicy:
    """How far ahead partitions are made, and how long raw readings are kept (0: for ever)."""

    months_ahead: int = 3
    raw_days: int = 0

    def raw_since(self, now: datetime) -> datetime | None:
        """The oldest moment raw readings are surely kept for, or ``None`` when all are."""
        return now - timedelta(days=self.raw_days) if self.raw_days else None


class ReadingRetention:
    """One maintenance pass over the readings' partitions."""

    def __init__(
        self, db: Database, policy: RetentionPolicy, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._db = db
        self._policy = policy
        self._clock = clock

    async def run(self) -> tuple[int, int]:
        """Make the missing partitions ahead and drop expired ones; (made, dropped)."""
        async with self._db.as_system() as conn:
            made = await partitions.ensure_partitions(conn, self._policy.months_ahead)
        dropped = 0
        cutoff = self._policy.raw_since(self._clock())
        if cutoff is not None:
            async with self._db.as_system() as conn:
                dropped = await partitions.drop_partitions_before(conn, cutoff)
        if made or dropped:
            log.info("readings partitions: %d made ahead, %d dropped by retention", made, dropped)
        return made, dropped
