"""A damaged card: check the database at start-up, quarantine a damaged one, salvage its rows.

The damaged file (with its -wal and -shm) is moved to ``<state>/quarantine/<time>/`` and never
deleted. A new database gets the damaged one's schema and every row that can still be read:
each table is walked in key order, and where a page cannot be read the walk steps over it
(probing further and further ahead, then bisecting back to the first readable key), so one bad
page costs the rows on it, not the table. SQLite's own ``.recover`` needs the ``sqlite_dbpage``
table, which Debian's and Raspberry Pi OS's SQLite are built without
(docs/adr/0055-integrity-and-backups.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["SalvageReport", "damage", "salvage"]

log = logging.getLogger(__name__)

_MIN = -(2**63)
_MAX = 2**63 - 1
_CHUNK = 5000
_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass
class SalvageReport:
    """What a salvage found and kept; saved beside the quarantined file as report.json."""

    at: str
    quarantined: str
    problems: list[str]
    rows: dict[str, int] = field(default_factory=dict)
    """Rows recovered per table."""
    damaged_spots: dict[str, int] = field(default_factory=dict)
    """Unreadable places stepped over per table."""
    schema_readable: bool = True

    @property
    def total_rows(self) -> int:
        """Rows recovered in all tables."""
        return sum(self.rows.values())


LARGE_TABLES = (
    "readings",
    "readings_1m",
    "readings_1h",
    "readings_by_series",
    "readings_1m_by_series",
    "readings_1h_by_series",
)
"""Checked after start-up, in the background: their quick_check takes seconds at 10 million
readings, and start-up must not (agent/ops/integrity.py)."""


def damage(
    path: Path,
    *,
    only: Sequence[str] | None = None,
    skip: Sequence[str] = (),
    stop: threading.Event | None = None,
) -> list[str]:
    """The problems ``PRAGMA quick_check`` finds (empty when the database is sound or absent):
    of the whole file, of the tables ``only``, or of every table but ``skip``. Setting ``stop``
    abandons the check (nothing found)."""
    if not path.exists():
        return []
    try:
        with contextlib.closing(_open_read_only(path)) as conn:
            if stop is not None:
                conn.set_progress_handler(lambda: int(stop.is_set()), 10_000)
            if only is None and not skip:
                return _verdict(conn, "PRAGMA quick_check(20)")
            names = [
                str(row[0])
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            found: list[str] = []
            for name in names:
                wanted = name in only if only is not None else name not in skip
                if wanted:
                    found += _verdict(conn, f"PRAGMA quick_check({_quote(name)})")
            return found
    except sqlite3.DatabaseError as err:
        if stop is not None and stop.is_set():
            return []  # interrupted, not damaged
        return [str(err)]


def _verdict(conn: sqlite3.Connection, pragma: str) -> list[str]:
    found = [str(row[0]) for row in conn.execute(pragma)]
    return [] if found == ["ok"] else found


def salvage(path: Path, problems: Sequence[str]) -> SalvageReport:
    """Move the damaged database aside and put a database of its readable rows in its place."""
    moment = datetime.now(UTC)
    quarantine = path.parent / "quarantine" / moment.strftime("%Y%m%dT%H%M%S.%fZ")
    quarantine.mkdir(parents=True)
    damaged = quarantine / path.name
    path.rename(damaged)
    for suffix in _SIDE_FILES:
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(quarantine / side.name)
    report = SalvageReport(
        at=moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        quarantined=str(quarantine),
        problems=list(problems)[:20],
    )
    partial = path.with_name(path.name + ".salvage")
    partial.unlink(missing_ok=True)
    try:
        _salvage_into(damaged, partial, report)
    except sqlite3.DatabaseError as err:
        report.schema_readable = False
        report.problems.append(f"salvage stopped: {err}")
        log.error("salvage of %s stopped: %s", damaged, err)
    if partial.exists():
        partial.rename(path)
    (quarantine / "report.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report


def _open_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _salvage_into(damaged: Path, target: Path, report: SalvageReport) -> None:
    with contextlib.closing(_open_read_only(damaged)) as source:
        schema = source.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
            " AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        ).fetchall()
        (version,) = source.execute("PRAGMA user_version").fetchone()
        out = sqlite3.connect(target, isolation_level=None)
        try:
            out.execute("BEGIN")
            tables = [(name, sql) for kind, name, sql in schema if kind == "table"]
            for _, sql in tables:
                out.execute(sql)
            for name, sql in tables:
                copied, spots = _copy_table(source, out, name, sql)
                report.rows[name] = copied
                if spots:
                    report.damaged_spots[name] = spots
            _copy_sequences(source, out)
            for kind, _, sql in schema:
                if kind in ("index", "trigger", "view"):
                    out.execute(sql)
            out.execute(f"PRAGMA user_version={int(version)}")
            out.execute("COMMIT")
        finally:
            out.close()


def _copy_sequences(source: sqlite3.Connection, out: sqlite3.Connection) -> None:
    try:
        rows = source.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    except sqlite3.DatabaseError:
        return  # no AUTOINCREMENT table, or its page is lost: max(rowid) + 1 is used instead
    out.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", rows)


def _copy_table(
    source: sqlite3.Connection, out: sqlite3.Connection, table: str, sql: str
) -> tuple[int, int]:
    """Copy every readable row of ``table``; return (rows copied, damaged places skipped)."""
    info = source.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    columns = [str(row[1]) for row in info]
    if re.search(r"WITHOUT\s+ROWID", sql, re.IGNORECASE):
        key_info = sorted((row for row in info if row[5]), key=lambda row: row[5])
        key = [str(row[1]) for row in key_info]
        steppable = all("INT" in str(row[2]).upper() for row in key_info)
    else:
        key, steppable = ["rowid"], True
    keys = ", ".join(_quote(k) for k in key)
    marks = ", ".join("?" for _ in key)
    select = (
        f"SELECT {keys}, {', '.join(_quote(c) for c in columns)} FROM {_quote(table)}"
        f" WHERE ({keys}) > ({marks}) ORDER BY {keys}"
    )
    insert = (
        f"INSERT OR IGNORE INTO {_quote(table)} ({', '.join(_quote(c) for c in columns)})"
        f" VALUES ({', '.join('?' for _ in columns)})"
    )
    first = f"SELECT {keys}, {', '.join(_quote(c) for c in columns)} FROM {_quote(table)}"
    first += f" ORDER BY {keys}"
    position: list[int] | None = None
    copied = spots = 0
    width = len(key)
    while True:
        batch: list[Any] = []
        try:
            rows = source.execute(first) if position is None else source.execute(select, position)
            for row in rows:
                batch.append(row)
                if len(batch) >= _CHUNK:
                    copied += _insert(out, insert, batch, width)
                    position = list(batch[-1][:width])
                    batch = []
        except sqlite3.DatabaseError:
            if batch:
                copied += _insert(out, insert, batch, width)
                position = list(batch[-1][:width])
            spots += 1
            following = _next_readable(source, select, position or [_MIN] * width, steppable)
            if following is None:
                return copied, spots
            position = following
            continue
        copied += _insert(out, insert, batch, width)
        return copied, spots


def _insert(out: sqlite3.Connection, insert: str, batch: list[Any], width: int) -> int:
    before = out.total_changes
    out.executemany(insert, (row[width:] for row in batch))
    return out.total_changes - before


def _readable(source: sqlite3.Connection, select: str, position: list[int]) -> bool:
    try:
        source.execute(select + " LIMIT 1", position).fetchall()
    except sqlite3.DatabaseError:
        return False
    return True


def _next_readable(
    source: sqlite3.Connection, select: str, position: list[int], steppable: bool
) -> list[int] | None:
    """The first key past ``position`` from which the table reads again (None: nowhere)."""
    if not steppable:
        return None
    for index in reversed(range(len(position))):
        start = position[index]
        tail = [_MIN] * (len(position) - index - 1)

        def at(value: int, index: int = index, tail: list[int] = tail) -> list[int]:
            return [*position[:index], value, *tail]

        failed, step = start, 1
        while start + step <= _MAX:
            if _readable(source, select, at(start + step)):
                good = start + step
                while good - failed > 1:  # bisect back to the first readable key
                    middle = (good + failed) // 2
                    if _readable(source, select, at(middle)):
                        good = middle
                    else:
                        failed = middle
                return at(good)
            failed, step = start + step, step * 2
    return None
