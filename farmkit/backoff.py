"""Retry back-off, one rule for every retry loop of the agent and the cloud.

The delay before retry number ``n`` (0 for the first) is ``initial * 2**n``, at most
``maximum``. A jittered delay is drawn from ``[d/2, d]`` ("equal jitter"): at least half the
back-off is kept, and processes that failed together (agents after a broker or cloud restart,
ports that lost power together) do not retry in step. Retries of the process's own work (a
database write, a periodic step) are not jittered: nothing else competes with them in step.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "Retry"]

_MAX_DOUBLINGS = 30  # 2**30 times any initial delay is past any maximum in use


@dataclass(frozen=True)
class Backoff:
    """How long to wait before each retry."""

    initial: float
    maximum: float
    jitter: bool = True

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds before retry number ``attempt`` (0-based); ``rand`` draws from [0, 1)."""
        ceiling = min(self.maximum, self.initial * 2.0 ** min(attempt, _MAX_DOUBLINGS))
        if not self.jitter:
            return ceiling
        return ceiling / 2 + rand() * ceiling / 2


class Retry:
    """A retry loop's place in its back-off: each failure waits longer, a success starts over."""

    def __init__(self, backoff: Backoff, rand: Callable[[], float] = random.random) -> None:
        self._backoff = backoff
        self._rand = rand
        self._attempt = 0

    def next_delay(self) -> float:
        """The delay before the next retry."""
        delay = self._backoff.delay(self._attempt, self._rand)
        self._attempt += 1
        return delay

    def reset(self) -> None:
        """Start again from the initial delay (after a success)."""
        self._attempt = 0
