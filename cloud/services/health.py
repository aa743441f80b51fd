"""Health with real checks: both database pools, the mirror, and process figures."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from cloud.store.db import Database
from cloud.store.mirror import mirror_figures
from protocol.health import ProcessHealth
from protocol.schemas.common import Health
from protocol.schemas.system import Connectivity, DetailedHealth
from protocol.timefmt import iso

__all__ = ["HealthService"]

log = logging.getLogger(__name__)
_CHECK_TIMEOUT_S = 2.0


def _state(round_trip_ms: float | None) -> str:
    return "connected" if round_trip_ms is not None else "disconnected"


class HealthService:
    """Answers /health, /healthz and /supabase-items."""

    def __init__(
        self,
        db: Database,
        version: str,
        clock: Callable[[], float] = time.monotonic,
        *,
        mail: str = "not_configured",
    ) -> None:
        self._db = db
        self._mail = mail
        self._process = ProcessHealth(version, clock)

    def health(self) -> Health:
        """Cheap liveness: touches nothing."""
        return self._process.health()

    async def _ping(self) -> dict[str, float | None]:
        try:
            return await asyncio.wait_for(self._db.ping(), _CHECK_TIMEOUT_S)
        except TimeoutError:
            log.warning("database ping timed out after %.1f s", _CHECK_TIMEOUT_S)
            return {"user": None, "system": None}

    async def detailed(self) -> DetailedHealth:
        """Both database paths and process figures."""
        pings = await self._ping()
        healthy = all(ms is not None for ms in pings.values())
        database = "connected" if healthy else "disconnected"
        checks = {
            "database": database,
            "database_user_path": _state(pings["user"]),
            "database_system_path": _state(pings["system"]),
            # The cloud's backend is its own PostgreSQL.
            "backend": database,
            # No cache server is part of the cloud; reported honestly.
            "cache": "not_configured",
            "mail": self._mail,
        }
        return self._process.detailed("healthy" if healthy else "unhealthy", checks)

    async def connectivity(self) -> Connectivity:
        """The database behind the mirror: round trip, records held, the newest agent sync."""
        disconnected = Connectivity(
            status="disconnected", items_count=0, connection_time=0, last_sync=None
        )
        round_trip = (await self._ping())["system"]
        if round_trip is None:
            return disconnected
        try:
            async with asyncio.timeout(_CHECK_TIMEOUT_S), self._db.as_system() as conn:
                items, last_sync = await mirror_figures(conn)
        except Exception:  # any failure of the probe means "disconnected", never a 500
            log.warning("mirror figures unavailable", exc_info=True)
            return disconnected
        return Connectivity(
            status="connected",
            items_count=items,
            connection_time=round(round_trip),
            last_sync=iso(last_sync) if last_sync is not None else None,
        )
