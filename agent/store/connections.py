"""The SQLite connections of the agent's database: how each kind is opened, and the types of the
work they run."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

__all__ = [
    "BUSY_TIMEOUT_MS",
    "OPEN_TIMEOUT_S",
    "Params",
    "Work",
    "connect",
    "connect_inline",
    "first_row",
]

Params = Sequence[Any]
T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]
OPEN_TIMEOUT_S = 30.0
BUSY_TIMEOUT_MS = 5000


async def connect(path: Path, *, check_same_thread: bool = True) -> aiosqlite.Connection:
    """A connection for the writer or a reader, on its own thread: WAL, durable commits."""
    conn = await asyncio.wait_for(
        aiosqlite.connect(path, isolation_level=None, check_same_thread=check_same_thread),
        OPEN_TIMEOUT_S,
    )
    conn.row_factory = sqlite3.Row
    for pragma in (
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=FULL",
        "PRAGMA foreign_keys=ON",
        f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
        # After a checkpoint the WAL file is cut back to this size (bounded on the SD card).
        "PRAGMA journal_size_limit=67108864",
        # Statement journals and sorts stay in memory: a statement that rewrites many
        # pages inside a savepoint (a fold of staged readings) spilled its journal to a
        # temporary file, as many bytes written again as the statement changed.
        "PRAGMA temp_store=MEMORY",
        # Deleted rows are zeroed only on pages written anyway, never a page of its own:
        # Debian's SQLite (Raspberry Pi OS's too) is built with secure_delete on, which may
        # rewrite a freed page only to zero it (https://www.sqlite.org/pragma.html#pragma_secure_delete).
        "PRAGMA secure_delete=FAST",
    ):
        await conn.execute(pragma)
    return conn


def connect_inline(path: Path) -> sqlite3.Connection:
    """The connection of :meth:`Database.lookup`, used on the event loop's thread only: read-only,
    and never waiting for a lock (a busy database sends the read to a reader thread)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    # Its reads touch a few hot pages (sessions, users, farms, grants): a small page cache;
    # the operating system's cache holds the rest.
    for pragma in ("PRAGMA query_only=ON", "PRAGMA busy_timeout=0", "PRAGMA cache_size=-512"):
        conn.execute(pragma)
    return conn


def first_row(sql: str, params: Params, conn: sqlite3.Connection) -> sqlite3.Row | None:
    cursor = conn.execute(sql, params)
    try:
        row: sqlite3.Row | None = cursor.fetchone()
    finally:
        cursor.close()  # a RETURNING with more rows would keep the statement (and COMMIT) busy
    return row
