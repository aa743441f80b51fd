"""Read caches that stay correct by construction: entries die with the next committed write."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from agent.store.db import Database

__all__ = ["GenerationCache", "NothingDue"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class GenerationCache(Generic[K, V]):
    """Caches values computed from the database until a write transaction commits.

    The agent is the only writer of its database, and :class:`Database` counts commits, so an
    entry tagged with the generation read *before* its query can never outlive a change. Hot
    writes (``Database.write(..., hot=True)``: readings, outbox, devices' reported state and
    stamps, command records) are not counted: a cached value must not be computed from them.
    """

    def __init__(self, db: Database, max_entries: int = 512) -> None:
        self._db = db
        self._max = max_entries
        self._entries: dict[K, tuple[int, V]] = {}
        self._loading: dict[tuple[K, int], asyncio.Future[V]] = {}

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

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The cached value, or ``load()``'s result, run once however many callers miss at once.

        After a commit every in-flight request misses together; without this, fifty concurrent
        requests would each run the same query one after another on the reader connection.
        """
        cached = self.get(key)
        if cached is not None:
            return cached
        generation = self.generation()
        pending = self._loading.get((key, generation))
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this caller was cancelled, not the load
                return await load()  # the loading request went away: load for ourselves
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._loading[(key, generation)] = future
        try:
            value = await load()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as err:
            future.set_exception(err)
            future.exception()  # mark it retrieved: the waiters re-raise it
            raise
        finally:
            del self._loading[(key, generation)]
        future.set_result(value)
        self.put(key, generation, value)
        return value


class NothingDue:
    """What an outbox's look that found nothing due learned: when the next pending item is due
    (None: nothing is pending), as of a commit ``generation``.

    Until a commit lands or that time comes, a look would find nothing again, and can answer
    without a query: a delivery loop's look every second then costs nothing while nothing is
    due. Correct only for an outbox whose items are queued, made due or enabled by commits
    that count in the generation, never by hot writes alone.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._found: tuple[int, str | None] | None = None

    def generation(self) -> int:
        """Take this before the look's queries."""
        return self._db.generation

    def holds(self, stamp: str) -> bool:
        """Whether a look at ``stamp`` (``iso`` text) would still find nothing."""
        found = self._found
        if found is None or found[0] != self._db.generation:
            return False
        due = found[1]
        return due is None or stamp < due

    def found_nothing(self, generation: int, next_due: str | None) -> None:
        """A look that began at ``generation`` found nothing due; the next is due then."""
        self._found = (generation, next_due)

    def forget(self) -> None:
        """Look again next time (items were released without a commit)."""
        self._found = None
