"""Point reads on the event loop's thread (``Database.lookup``): they see every commit at once,
hold nothing open, and never block the loop on a busy database."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.store.db import Database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "agent.db")
    await database.open()
    await database.write(
        lambda conn: conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    )
    yield database
    await database.close()


async def test_a_lookup_sees_each_write_as_soon_as_it_returns(db: Database) -> None:
    async def note(i: int) -> None:
        await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (?, ?)", (i, f"n{i}")))
        row = await db.lookup("SELECT text FROM notes WHERE id = ?", (i,))
        assert row is not None and row["text"] == f"n{i}"

    await asyncio.gather(*(note(i) for i in range(30)))
    async with db.transaction() as conn:
        await conn.execute("UPDATE notes SET text = 'changed' WHERE id = 7")
    changed = await db.lookup("SELECT text FROM notes WHERE id = 7")
    assert changed is not None and changed["text"] == "changed"
    assert await db.lookup("SELECT text FROM notes WHERE id = 99") is None


async def test_lookups_leave_no_read_open_that_would_hold_back_a_checkpoint(db: Database) -> None:
    await db.write(
        lambda conn: conn.executemany(
            "INSERT INTO notes VALUES (?, ?)", [(i, "x" * 500) for i in range(200)]
        )
    )
    for i in range(50):
        await db.lookup("SELECT text FROM notes WHERE id >= ?", (i,))  # more rows than fetched
    busy, _, _ = await db.checkpoint()
    assert busy == 0
    assert (db.path.parent / "agent.db-wal").stat().st_size == 0  # truncated: no reader held it


async def test_a_lookup_cannot_write(db: Database) -> None:
    with pytest.raises(sqlite3.OperationalError):
        await db.lookup("INSERT INTO notes VALUES (1, 'sneaky') RETURNING id")
    assert await db.fetch_value("SELECT count(*) FROM notes") == 0


class _BusyOnce(sqlite3.Connection):
    """An inline connection that finds the database busy once (as during crash recovery, which
    a test cannot hold open on demand)."""

    busy = True

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if _BusyOnce.busy:
            _BusyOnce.busy = False
            err = sqlite3.OperationalError("database is locked")
            err.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise err
        return super().execute(sql, parameters)


async def test_a_busy_database_sends_the_lookup_to_a_reader_thread(db: Database) -> None:
    await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (1, 'kept')"))
    inline = db._inline
    assert inline is not None
    db._inline = sqlite3.connect(db.path, factory=_BusyOnce)
    try:
        row = await db.lookup("SELECT text FROM notes WHERE id = 1")
    finally:
        db._inline.close()
        db._inline = inline
    assert not _BusyOnce.busy  # the inline read was refused...
    assert row is not None and row["text"] == "kept"  # ...and answered by a reader thread
