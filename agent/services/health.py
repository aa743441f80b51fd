"""Health checks with real figures: database round trip, MQTT broker, process memory and CPU."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Literal

from agent.store.db import Database
from agent.sync.runtime import SyncReport
from protocol.health import ProcessHealth
from protocol.schemas.common import Health
from protocol.schemas.system import Connectivity, DetailedHealth
from protocol.timefmt import iso, now_iso

__all__ = ["HealthService", "Status"]

Status = Literal["healthy", "degraded", "unhealthy"]
_RANK: dict[Status, int] = {"healthy": 0, "degraded": 1, "unhealthy": 2}

log = logging.getLogger(__name__)
_CHECK_TIMEOUT_S = 2.0


class HealthService:
    """Answers /health, /healthz and /supabase-items."""

    def __init__(self, db: Database, version: str, clock: Callable[[], float] = time.monotonic):
        self._db = db
        self._process = ProcessHealth(version, clock)
        self._mqtt: Callable[[], str] | None = None
        self._sync: Callable[[], Awaitable[SyncReport]] | None = None
        self._components: dict[str, Callable[[], bool]] = {}
        self._checks: dict[str, Callable[[], str]] = {}
        self._statuses: dict[str, Callable[[], Status]] = {}
        self._faults: list[str] = []

    def watch_component(self, name: str, alive: Callable[[], bool]) -> None:
        """A part without which the agent must be restarted (the systemd watchdog asks)."""
        self._components[name] = alive

    def add_check(
        self, name: str, check: Callable[[], str], status: Callable[[], Status] | None = None
    ) -> None:
        """Report ``check()`` as the /healthz check ``name`` (disk, mail, database salvage);
        ``status()``, when given, counts towards the overall status (the disk's room)."""
        self._checks[name] = check
        if status is not None:
            self._statuses[name] = status

    def fault(self, reason: str) -> None:
        """Something found that only a restart mends (a damaged database to salvage)."""
        self._faults.append(reason)

    def problem(self) -> str | None:
        """Why the agent needs a restart, or None while every watched part is alive."""
        dead = [name for name, alive in self._components.items() if not alive()]
        reasons = [f"{', '.join(dead)} stopped"] if dead else []
        reasons += self._faults
        return "; ".join(reasons) or None

    def summary(self) -> str:
        """One line for ``systemctl status``."""
        parts = [f"Serving, up {self._process.uptime_s} s"]
        if self._mqtt is not None:
            parts.append(f"MQTT {self._mqtt()}")
        parts.extend(f"{name} {check()}" for name, check in self._checks.items())
        return "; ".join(parts)

    def watch_sync(self, report: Callable[[], Awaitable[SyncReport]]) -> None:
        """Report the cloud link and the outbox (docs/design.md section 8) from ``report``."""
        self._sync = report

    async def _sync_report(self) -> SyncReport | None:
        if self._sync is None:
            return None
        try:
            return await asyncio.wait_for(self._sync(), _CHECK_TIMEOUT_S)
        except Exception:  # a health probe reports any failure as a missing figure
            log.warning("sync figures unavailable", exc_info=True)
            return None

    def watch_mqtt(self, state: Callable[[], str]) -> None:
        """Report the MQTT broker link (connected, disconnected, disabled) from ``state``."""
        self._mqtt = state

    def health(self) -> Health:
        """Cheap liveness."""
        return self._process.health()

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
            # The agent keeps no cache server; the API's cache check says so rather than pass.
            "cache": "not_configured",
            "mqtt": "not_configured" if self._mqtt is None else self._mqtt(),
        }
        checks.update(_sync_checks(await self._sync_report()))
        checks.update((name, check()) for name, check in self._checks.items())
        problem = self.problem()
        if problem is not None:
            checks["runtime"] = problem
        # Without the broker the agent still serves and keeps its schedules: degraded, not down.
        degraded = checks["mqtt"] == "disconnected" or problem is not None
        found: list[Status] = [status() for status in self._statuses.values()]
        found.append("degraded" if degraded else "healthy")
        found.append("healthy" if database_ok else "unhealthy")
        return self._process.detailed(max(found, key=_RANK.__getitem__), checks)

    async def connectivity(self) -> Connectivity:
        """The backend link: once paired, the cloud (records waiting, round trip, last sync);
        until then the local database and what it holds."""
        report = await self._sync_report()
        if report is not None and report.paired:
            last = report.outbox.last_success_ms
            stuck = report.status.stuck_since_ms
            return Connectivity(
                status=f"stuck since {_iso_ms(stuck)}: {report.status.last_error}"
                if stuck is not None
                else ("connected" if report.status.connected else "disconnected"),
                items_count=report.outbox.records,
                connection_time=report.status.round_trip_ms,
                last_sync=None if last is None else _iso_ms(last),
            )
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


def _iso_ms(unix_ms: int) -> str:
    return iso(datetime.fromtimestamp(unix_ms / 1000, UTC))


def _sync_checks(report: SyncReport | None) -> dict[str, str]:
    """The cloud link's figures as /healthz checks (docs/design.md section 8)."""
    if report is None or not report.paired:
        return {"cloud": "not_paired"}
    out = report.outbox
    age = report.oldest_unsent_age_s
    status = report.status
    stuck = status.stuck_since_ms
    return {
        "cloud": "stuck"
        if stuck is not None
        else ("connected" if status.connected else "disconnected"),
        "sync_stuck_since": "" if stuck is None else _iso_ms(stuck),
        "sync_last_error": status.last_error or "",
        "sync_failures": str(status.failures),
        "sync_lag_seq": str(out.lag),
        "sync_records_queued": str(out.records),
        "sync_bytes_queued": str(out.bytes),
        "sync_oldest_unsent_age_s": "0" if age is None else f"{age:.0f}",
        "sync_last_success": "never"
        if out.last_success_ms is None
        else _iso_ms(out.last_success_ms),
        "sync_rolled_up": str(out.rolled_up),
        "sync_rejected": str(out.rejected),
    }
