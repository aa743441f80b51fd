"""The SQLite database: WAL, durable commits, one writer, migrations at open."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import aiosqlite

__all__ = ["Database", "StoreCorrupted"]

log = logging.getLogger(__name__)

Params = Sequence[Any]
_OPEN_TIMEOUT_S = 30.0


class StoreCorrupted(Exception):
    """The database failed its integrity check at start-up."""


def _migrations() -> list[tuple[int, str, str]]:
    """Numbered migration scripts shipped in ``agent.store.migrations``, in order."""
    found = []
    for entry in resources.files("agent.store.migrations").iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


class Database:
    """An SQLite file opened for one writer and one reader connection.

    Writes go through :meth:`transaction`, which serializes writers and commits with
    ``synchronous=FULL`` so an acknowledged write survives a power cut. Reads use a second
    connection and, under WAL, never wait for a writer.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self.generation = 0
        """Count of committed write transactions since open (see ``GenerationCache``)."""

    async def open(self) -> None:
        """Open both connections, check integrity, and apply pending migrations."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = await self._connect()
        await self._check_integrity(self._writer)
        await self._migrate(self._writer)
        self._reader = await self._connect()

    async def close(self) -> None:
        """Close both connections."""
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    async def _connect(self) -> aiosqlite.Connection:
        conn = await asyncio.wait_for(
            aiosqlite.connect(self.path, isolation_level=None), _OPEN_TIMEOUT_S
        )
        conn.row_factory = sqlite3.Row
        for pragma in (
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=FULL",
            "PRAGMA foreign_keys=ON",
            "PRAGMA busy_timeout=5000",
            # After a checkpoint the WAL file is cut back to this size (bounded on the SD card).
            "PRAGMA journal_size_limit=67108864",
        ):
            await conn.execute(pragma)
        return conn

    async def _check_integrity(self, conn: aiosqlite.Connection) -> None:
        rows = await conn.execute_fetchall("PRAGMA quick_check")
        verdict = [row[0] for row in rows]
        if verdict != ["ok"]:
            raise StoreCorrupted(f"{self.path}: quick_check failed: {verdict[:5]}")

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        """Apply every migration file not yet recorded, in number order.

        Numbers come from blocks assigned to parallel work, so one below the newest applied may
        land later: applied numbers are recorded one by one (``schema_migrations``), not as a
        high-water mark. A database from before that table counts everything up to its
        ``user_version`` as applied.
        """
        await self._record_legacy_version(conn)
        applied = {row[0] for row in await conn.execute_fetchall(
            "SELECT version FROM schema_migrations")}  # fmt: skip
        for number, name, script in _migrations():
            if number in applied:
                continue
            log.info("applying migration %s", name)
            try:
                await conn.executescript(
                    f"BEGIN IMMEDIATE;\n{script}\n"
                    f"INSERT INTO schema_migrations (version) VALUES ({number});\n"
                    f"PRAGMA user_version={max([number, *applied])};\nCOMMIT;"
                )
            except sqlite3.Error:
                await conn.execute("ROLLBACK") if conn.in_transaction else None
                raise
            applied.add(number)

    async def _record_legacy_version(self, conn: aiosqlite.Connection) -> None:
        """Create the migration record; a database that has none yet had every migration up to
        its ``user_version`` applied."""
        exists = await conn.execute_fetchall(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        )
        if exists:
            return
        (version,) = next(iter(await conn.execute_fetchall("PRAGMA user_version")))
        done = [(number,) for number, _, _ in _migrations() if number <= int(version)]
        await conn.execute("BEGIN IMMEDIATE")
        await conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        await conn.executemany("INSERT INTO schema_migrations (version) VALUES (?)", done)
        await conn.execute("COMMIT")

    async def checkpoint(self) -> tuple[int, int, int]:
        """Copy the WAL into the database and truncate it; (busy, wal pages, checkpointed).

        SQLite's automatic checkpoints never reset the WAL while readers keep it busy; this one
        waits for the writer lock, so no write of ours is in flight, and truncates the file."""
        if self._writer is None:
            raise RuntimeError("database is not open")
        async with self._write_lock:
            rows = await self._writer.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, pages, done = next(iter(rows))
        return int(busy), int(pages), int(done)

    @property
    def _read_conn(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise RuntimeError("database is not open")
        return self._reader

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """Run a write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT``, or rollback on error."""
        if self._writer is None:
            raise RuntimeError("database is not open")
        async with self._write_lock:
            conn = self._writer
            await conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
            try:
                await conn.execute("COMMIT")
            finally:  # even a cancelled COMMIT may have landed: invalidate caches regardless
                self.generation += 1

    async def fetch_all(self, sql: str, params: Params = ()) -> Iterable[sqlite3.Row]:
        """Run a read query and return all rows."""
        return await self._read_conn.execute_fetchall(sql, params)

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
