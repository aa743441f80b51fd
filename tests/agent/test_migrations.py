"""The agent's schema migrations at open: every shipped file applied once and recorded, and a
database from before the record keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.store.db import Database
from agent.store.migrate import _migrations


def recorded(path: Path) -> tuple[list[int], int]:
    with sqlite3.connect(path) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
        (user_version,) = conn.execute("PRAGMA user_version").fetchone()
    return sorted(versions), user_version


async def open_and_close(path: Path) -> None:
    db = Database(path)
    await db.open()
    await db.close()


async def test_a_new_database_records_every_shipped_migration(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    await open_and_close(path)
    shipped = [m.version for m in _migrations()]
    assert recorded(path) == (shipped, max(shipped))


async def test_reopening_applies_nothing_again(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    await open_and_close(path)
    await open_and_close(path)  # a second application of any file would fail on its tables
    shipped = [m.version for m in _migrations()]
    assert recorded(path)[0] == shipped


async def test_a_database_from_before_the_record_counts_its_user_version_as_applied(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    await open_and_close(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE schema_migrations")
    await open_and_close(path)
    shipped = [m.version for m in _migrations()]
    assert recorded(path) == (shipped, max(shipped))


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


async def test_a_new_database_has_small_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    """An SD card wears by the bytes written: a new database gets 1 KiB pages (a commit of a few
    readings rewrites less), an existing one with 4 KiB pages opens and works unchanged."""
    new = tmp_path / "new.db"
    await open_and_close(new)
    assert _page_size(new) == 1024
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
    await open_and_close(old)
    assert _page_size(old) == 4096
    assert recorded(old)[0] == [m.version for m in _migrations()]
