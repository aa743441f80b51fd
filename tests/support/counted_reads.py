"""A database that counts the reads a store makes through it (reads on a reader thread)."""

from __future__ import annotations

from typing import Any

from agent.store.db import Database

__all__ = ["CountedReads"]


class CountedReads:
    """The database, counting the reads (``fetch_*``) a store makes through it."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._db, name)
        if name.startswith("fetch_"):

            async def counted(*args: Any, **kwargs: Any) -> Any:
                self.reads += 1
                return await found(*args, **kwargs)

            return counted
        return found
