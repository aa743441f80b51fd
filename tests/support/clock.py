"""A clock for agents under test: wall-clock time that moves only when the test says so."""

from __future__ import annotations

import time


class Clock:
    """Starts at the real time; ``advance`` moves it on."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move on ``seconds`` and return the new time."""
        self.now += seconds
        return self.now
