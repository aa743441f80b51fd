"""The reads of the agent's database: point reads on the event loop's thread, the rest on reader
connections with threads of their own (SQLite releases the GIL while it reads)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import aiosqlite

from agent.store.connections import Params

__all__ = ["Reads"]


class Reads:
    """The read side of :class:`~agent.store.db.Database`, over the connections it opens."""

    def __init__(self) -> None:
        self._readers: list[aiosqlite.Connection] = []
        self._inline: sqlite3.Connection | None = None
        self._next_reader = 0

    @property
    def _read_conn(self) -> aiosqlite.Connection:
        if not self._readers:
            raise RuntimeError("database is not open")
        self._next_reader = (self._next_reader + 1) % len(self._readers)
        return self._readers[self._next_reader]

    async def lookup(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """The first row of a point read (a primary or unique key: a few pages), run right here
        on the event loop's thread.

        A hop to a reader thread costs far more than such a read: the request waits for that
        thread's queue and then for the GIL, held by the busy loop, once per statement. Under
        WAL a reader never waits for the writer; should the database still be busy (recovery
        after a crash), the read goes to a reader thread instead of blocking the loop. Reads
        that scan or return many rows belong in :meth:`fetch_all` and the like.
        """
        if self._inline is None:
            raise RuntimeError("database is not open")
        try:
            cursor = self._inline.execute(sql, params)
            try:
                row: sqlite3.Row | None = cursor.fetchone()
            finally:
                cursor.close()  # end the read transaction: an open one would hold back checkpoints
            return row
        except sqlite3.OperationalError as err:
            if err.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
        return await self.fetch_one(sql, params)

    async def fetch_all(self, sql: str, params: Params = ()) -> Iterable[sqlite3.Row]:
        """Run a read query and return all rows."""
        return await self._read_conn.execute_fetchall(sql, params)

    async def fetch_chunks(
        self, sql: str, params: Params = (), size: int = 2_000
    ) -> AsyncIterator[list[sqlite3.Row]]:
        """The rows of a read query ``size`` at a time, for a caller that keeps them in a form
        of its own: a result of tens of thousands of rows is never held whole as row objects."""
        async with self._read_conn.execute(sql, params) as cursor:
            while rows := await cursor.fetchmany(size):
                yield list(rows)

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """Run a read query and return its first row, if any."""
        rows = await self._read_conn.execute_fetchall(sql, params)
        return next(iter(rows), None)

    async def fetch_page(
        self,
        source: str,
        where: str,
        params: Sequence[Any],
        *,
        order: str,
        limit: int,
        offset: int,
        columns: str = "*",
    ) -> tuple[list[sqlite3.Row], int]:
        """One page of ``SELECT columns FROM source WHERE where ORDER BY order``, and the total
        number of matching rows before paging (every list endpoint answers both)."""
        total = await self.fetch_value(f"SELECT count(*) FROM {source} WHERE {where}", params)
        rows = await self.fetch_all(
            f"SELECT {columns} FROM {source} WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return list(rows), int(total)

    async def fetch_value(self, sql: str, params: Params = ()) -> Any:
        """Run a read query and return the first column of its first row (or ``None``)."""
        row = await self.fetch_one(sql, params)
        return None if row is None else row[0]
