"""Read caches that stay correct by construction: entries die with the next committed write."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from agent.store.db import Database

__all__ = ["GenerationCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class GenerationCache(Generic[K, V]):
    """Caches values computed from the database until any write transaction commits.

    The agent is the only writer of its database, and :class:`Database` counts commits, so an
    entry tagged with the generation read *before* its query can never outlive a change.
    """

    def __init__(self, db: Database, max_entries: int = 512) -> None:
        self._db = db
        self._max = max_entries
        self._entries: dict[K, tuple[int, V]] = {}

    def generation(self) -> int:
        """Take this before running the query whose result will be stored."""
        return self._db.generation

    def get(self, key: K) -> V | None:
        """The cached value, if it was computed at the current generation."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != self._db.generation:
            return None
        return entry[1]

    def put(self, key: K, generation: int, value: V) -> None:
        """Store a value computed from reads that started at ``generation``."""
        if len(self._entries) >= self._max:
            self._entries.clear()
        self._entries[key] = (generation, value)
