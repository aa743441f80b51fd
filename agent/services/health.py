"""Health checks with real figures: database round trip, process memory and CPU."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import psutil

from agent.store.db import Database
from protocol.schemas.common import Health
from protocol.schemas.system import Connectivity, DetailedHealth
from protocol.timefmt import now_iso

__all__ = ["HealthService"]

log = logging.getLogger(__name__)
_CHECK_TIMEOUT_S = 2.0


class HealthService:
    """Answers /health, /healthz and /supabase-items."""

    def __init__(self, db: Database, version: str, clock: Callable[[], float] = time.monotonic):
        self._db = db
        self._version = version
        self._clock = clock
        self._started = clock()
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # prime: the first reading is always 0.0

    def health(self) -> Health:
        """Cheap liveness."""
        return Health(status="healthy", timestamp=now_iso(), version=self._version)

    async def _database_round_trip_ms(self) -> int | None:
        started = time.perf_counter()
        try:
            await asyncio.wait_for(self._db.fetch_value("SELECT 1"), _CHECK_TIMEOUT_S)
        except Exception:
            log.warning("database health check failed", exc_info=True)
            return None
        return round((time.perf_counter() - started) * 1000)

    async def detailed(self) -> DetailedHealth:
        """Checks of every dependency and process figures."""
        database_ok = await self._database_round_trip_ms() is not None
        checks = {
            "database": "connected" if database_ok else "disconnected",
            # Until the agent is paired, its backend is its own database.
            "backend": "connected" if database_ok else "disconnected",
            # The agent keeps no cache server; SPEC.md's check is reported honestly.
            "cache": "not_configured",
        }
        memory = self._process.memory_info().rss
        return DetailedHealth(
            status="healthy" if database_ok else "unhealthy",
            timestamp=now_iso(),
            version=self._version,
            checks=checks,
            uptime=int(self._clock() - self._started),
            memory_usage=f"{self._process.memory_percent():.1f}%",
            cpu_usage=f"{self._process.cpu_percent(None):.1f}%",
            memory_rss_bytes=memory,
        )

    async def connectivity(self) -> Connectivity:
        """The backend link: until pairing, the local database and what it holds."""
        elapsed = await self._database_round_trip_ms()
        if elapsed is None:
            return Connectivity(
                status="disconnected", items_count=0, connection_time=0, last_sync=None
            )
        items = await self._db.fetch_value(
            "SELECT (SELECT count(*) FROM farms) + (SELECT count(*) FROM farm_rows)"
            " + (SELECT count(*) FROM racks) + (SELECT count(*) FROM shelves)"
            " + (SELECT count(*) FROM devices)"
        )
        return Connectivity(
            status="connected", items_count=int(items), connection_time=elapsed, last_sync=now_iso()
        )
