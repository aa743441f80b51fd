"""The per-user limit on open stream connections (docs/design.md section 7: 10 per user, else 4429).

The one place that counts a user's connections. :class:`LocalConnectionLimit` counts in this
process, which is the whole truth for the agent and for a cloud running as one process; a cloud
running as several processes can count across them by giving the service another
:class:`ConnectionLimit` (a shared table or advisory locks), with nothing else changing.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

__all__ = ["ConnectionLimit", "LocalConnectionLimit"]


class ConnectionLimit(Protocol):
    """Admits and releases a user's stream connections."""

    async def acquire(self, user_id: str) -> bool:
        """Count one more connection of ``user_id``; False (nothing counted) if over the limit."""
        ...

    async def release(self, user_id: str) -> None:
        """Count one connection of ``user_id`` fewer."""
        ...

    def total(self) -> int:
        """Open connections counted by this process, all users together."""
        ...

    def of(self, user_id: str) -> int:
        """Open connections of ``user_id`` counted by this process."""
        ...


class LocalConnectionLimit:
    """Counts connections in this process: at most ``maximum`` per user."""

    def __init__(self, maximum: int) -> None:
        self._maximum = maximum
        self._open: Counter[str] = Counter()

    async def acquire(self, user_id: str) -> bool:
        """Count one more connection of ``user_id``; False if it already has ``maximum``."""
        if self._open[user_id] >= self._maximum:
            return False
        self._open[user_id] += 1
        return True

    async def release(self, user_id: str) -> None:
        """Count one connection of ``user_id`` fewer."""
        self._open[user_id] -= 1
        if self._open[user_id] <= 0:
            del self._open[user_id]

    def total(self) -> int:
        """Open connections of all users."""
        return sum(self._open.values())

    def of(self, user_id: str) -> int:
        """Open connections of ``user_id``."""
        return self._open[user_id]
