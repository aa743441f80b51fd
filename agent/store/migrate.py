"""The agent's schema migrations: the SQL files of ``agent.store.migrations`` applied at open by
the runner the cloud shares (farmkit/migrations.py).

Applied numbers are recorded one by one (``schema_migrations``), not as a high-water mark; the
highest is also kept in ``user_version``. A database from before that table counts everything
up to its ``user_version`` as applied.
"""

from __future__ import annotations

import sqlite3
from importlib import resources

import aiosqlite

from farmkit.migrations import Migration, load_migrations, run_migrations

__all__ = ["migrate"]


def _migrations() -> tuple[Migration, ...]:
    """The numbered migration scripts shipped in ``agent.store.migrations``, in order."""
    return load_migrations(resources.files("agent.store.migrations"))


class _SQLite:
    """The agent's migration record: the applied numbers, nothing else."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._applied: set[int] = set()

    async def recorded(self) -> dict[int, str]:
        rows = await self._conn.execute_fetchall("SELECT version FROM schema_migrations")
        self._applied = {row[0] for row in rows}
        return dict.fromkeys(self._applied, "")

    async def check(self, migration: Migration, recorded: str) -> None:
        """Applied files are not checked again."""

    async def apply(self, migration: Migration) -> None:
        conn, number = self._conn, migration.version
        try:
            await conn.executescript(
                f"BEGIN IMMEDIATE;\n{migration.sql}\n"
                f"INSERT INTO schema_migrations (version) VALUES ({number});\n"
                f"PRAGMA user_version={max([number, *self._applied])};\nCOMMIT;"
            )
        except sqlite3.Error:
            await conn.execute("ROLLBACK") if conn.in_transaction else None
            raise
        self._applied.add(number)


async def migrate(conn: aiosqlite.Connection) -> None:
    """Apply every migration file not yet recorded, in number order."""
    migrations = _migrations()
    await _record_legacy_version(conn, migrations)
    await run_migrations(migrations, _SQLite(conn))


async def _record_legacy_version(
    conn: aiosqlite.Connection, migrations: tuple[Migration, ...]
) -> None:
    """Create the migration record; a database that has none yet had every migration up to
    its ``user_version`` applied."""
    exists = await conn.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    if exists:
        return
    (version,) = next(iter(await conn.execute_fetchall("PRAGMA user_version")))
    done = [(m.version,) for m in migrations if m.version <= int(version)]
    await conn.execute("BEGIN IMMEDIATE")
    await conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
    await conn.executemany("INSERT INTO schema_migrations (version) VALUES (?)", done)
    await conn.execute("COMMIT")
