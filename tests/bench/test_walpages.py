"""bench/walpages.py reads which pages each commit appended to a real SQLite WAL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench.walpages import WalTail, page_names, report


def _wal_database(db: Path) -> sqlite3.Connection:
    """A database in WAL mode that checkpoints only when told, with a table ``stage``."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE stage (v)")
    return conn


def test_each_commit_names_the_tables_it_wrote(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    conn = _wal_database(db)
    conn.execute("CREATE TABLE stats (n)")
    conn.execute("INSERT INTO stats VALUES (0)")
    tail = WalTail(tmp_path / "agent.db-wal")
    tail.commits()
    for value in range(3):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO stage VALUES (?)", (value,))
        conn.execute("UPDATE stats SET n = n + 1")
        conn.execute("COMMIT")
    conn.execute("UPDATE stats SET n = 0")
    commits = tail.commits()
    names = page_names(db)
    conn.close()

    assert [sorted(names[p] for p in c) for c in commits] == [["stage", "stats"]] * 3 + [["stats"]]
    lines = report(commits, names, 1.0)
    assert lines[0] == (
        "4 commits in 1 s (4.00/s), 7 frames (1.8 per commit), 0 checkpoints restarting the WAL"
        " (the bytes above leave the checkpoint's copy out)"
    )
    assert "        3  stage, stats" in lines


def test_a_checkpoint_that_restarts_the_wal_is_counted(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    conn = _wal_database(db)
    tail = WalTail(tmp_path / "agent.db-wal")
    tail.commits()
    conn.execute("INSERT INTO stage VALUES (1)")
    assert len(tail.commits()) == 1
    conn.execute("PRAGMA wal_checkpoint(RESTART)")
    conn.execute("INSERT INTO stage VALUES (2)")  # the next writer starts the WAL over
    commits = tail.commits()
    conn.close()

    assert len(commits) == 1
    assert tail.restarts == 1
    assert ", 1 checkpoint restarting the WAL" in report(commits, {}, 1.0, tail.restarts)[0]
