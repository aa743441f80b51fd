"""The SQLite connections of the agent's database: how each kind is opened, and the types of the
work they run."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping, Sequence
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

Params = Sequence[Any] | Mapping[str, Any]
"""Positional parameters, or named ones (``:name``) by name."""
T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]
OPEN_TIMEOUT_S = 30.0
BUSY_TIMEOUT_MS = 5000
PAGE_SIZE = 1024
WAL_CHECKPOINT_BYTES = 64 * 2**20


async def connect(
    path: Path, *, check_same_thread: bool = True, cache_kib: int | None = None
) -> aiosqlite.Connection:
    """A connection for the writer or a reader, on its own thread: WAL, durable commits;
    ``cache_kib`` bounds its page cache (None: SQLite's default, 2,000 KiB)."""
    conn = await asyncio.wait_for(
        aiosqlite.connect(path, isolation_level=None, check_same_thread=check_same_thread),
        OPEN_TIMEOUT_S,
    )
    conn.row_factory = sqlite3.Row
    for pragma in (
        # A new database gets 1 KiB pages (an existing one keeps its own): at a farm's pace
        # a commit appends a few readings to the ends of two tables and every page it changes
        # is written whole to the WAL and again at the checkpoint; with 4 KiB pages that was
        # 423 B handed to write() per reading, with 1 KiB pages 235 B (bench/pace.py, ADR 0062).
        # It must come before journal_mode, which writes the file's first page.
        f"PRAGMA page_size={PAGE_SIZE}",
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
    if cache_kib is not None:
        await conn.execute(f"PRAGMA cache_size=-{cache_kib}")
    # SQLite checkpoints once the WAL holds 1,000 pages (1 MiB of 1 KiB ones). A checkpoint
    # copies the newest version of every page in the WAL into the database: the pages many
    # commits rewrite (the database header, the stage's parents, the outbox's counters) once
    # per checkpoint, and the stage's pages, freed by each fold and filled again, once per
    # checkpoint that finds them. So the WAL checkpoints at 64 MiB, which a farm's pace
    # does not reach between two of the agent's own checkpoints (every half hour,
    # `wal_checkpoint_interval_s`): bench/pace.py over 40 minutes at 500 devices, 261 B
    # written per reading with 4 MiB and checkpoints every 5 minutes, 215 B with this (ADR 0084).
    rows = await conn.execute_fetchall("PRAGMA page_size")
    pages = WAL_CHECKPOINT_BYTES // int(next(iter(rows))[0])
    await conn.execute(f"PRAGMA wal_autocheckpoint={pages}")
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
