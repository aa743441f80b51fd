"""The database's integrity check at open (agent/ops/integrity.py checks the rest after start)."""

from __future__ import annotations

from pathlib import Path

import aiosqlite

__all__ = ["StoreCorrupted", "check_integrity"]


class StoreCorrupted(Exception):
    """The database failed its integrity check at start-up."""


async def check_integrity(conn: aiosqlite.Connection, path: Path) -> None:
    """Raise :class:`StoreCorrupted` unless SQLite's ``quick_check`` finds the file sound."""
    rows = await conn.execute_fetchall("PRAGMA quick_check")
    verdict = [row[0] for row in rows]
    if verdict != ["ok"]:
        raise StoreCorrupted(f"{path}: quick_check failed: {verdict[:5]}")
