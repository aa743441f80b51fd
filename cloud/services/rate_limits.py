"""Rate limits counted in PostgreSQL, so every cloud process counts against one quota
(protocol/http/ratelimit.py holds the policy and the middleware the agent uses too).

While the database is down requests pass uncounted: whatever they need from the database
fails on its own with 503, and what needs none (liveness, the public status) keeps answering.
Login attempts are never let through unthrottled by this, since the throttle reads the database.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cloud.store import rate_counters
from cloud.store.db import Database, DatabaseUnavailable
from protocol.http.ratelimit import verdict_of
from protocol.http.ratelimit_verdict import Verdict

__all__ = ["SharedRateLimiter"]

log = logging.getLogger(__name__)


class SharedRateLimiter:
    """A :class:`protocol.http.ratelimit.RateCounter` whose counts live in ``rate_counters``."""

    def __init__(self, db: Callable[[], Database], clock: Callable[[], float] = time.time) -> None:
        # The database is opened after the middleware chain is built: looked up per call.
        self._db = db
        self._clock = clock
        self._down = False

    async def hit(self, key: str, limit: int, window_s: int) -> Verdict | None:
        """Count one request for ``key`` in the current window, across every process;
        ``None`` (uncounted) while the database is unavailable."""
        now = self._clock()
        window_start = int(now // window_s) * window_s
        try:
            async with self._db().as_system() as conn:
                count = await rate_counters.count_hit(conn, key, window_start)
        except DatabaseUnavailable:
            if not self._down:
                log.warning("rate limits are not counted while the database is unavailable")
            self._down = True
            return None
        if self._down:
            log.info("rate limits are counted again")
            self._down = False
        return verdict_of(count, limit, window_start, window_s, now)

    async def prune(self, longest_window_s: int) -> int:
        """Drop windows over for at least ``longest_window_s``; how many rows went."""
        ended_before = int(self._clock()) - 2 * longest_window_s
        async with self._db().as_system() as conn:
            return await rate_counters.prune_windows(conn, ended_before)
