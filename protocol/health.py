"""What /health and /healthz report alike on agent and cloud: liveness, uptime and the process's
memory and CPU. Each side adds its own checks and decides its status."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

from protocol.schemas.common import Health
from protocol.schemas.system import DetailedHealth
from protocol.timefmt import now_iso

__all__ = ["ProcessHealth"]


class ProcessHealth:
    """The running process as the health endpoints describe it."""

    def __init__(self, version: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.version = version
        self._clock = clock
        self._started = clock()
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # prime: the first reading is always 0.0

    @property
    def uptime_s(self) -> int:
        """Whole seconds since start-up."""
        return int(self._clock() - self._started)

    def health(self) -> Health:
        """Cheap liveness: touches nothing."""
        return Health(status="healthy", timestamp=now_iso(), version=self.version)

    def detailed(self, status: str, checks: dict[str, str]) -> DetailedHealth:
        """``checks`` and ``status`` with the process figures."""
        return DetailedHealth(
            status=status,
            timestamp=now_iso(),
            version=self.version,
            checks=checks,
            uptime=self.uptime_s,
            memory_usage=f"{self._process.memory_percent():.1f}%",
            cpu_usage=f"{self._process.cpu_percent(None):.1f}%",
            memory_rss_bytes=self._process.memory_info().rss,
        )
