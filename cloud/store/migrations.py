"""Schema migrations: numbered SQL files applied in order at start-up.

Files are named `NNNN_description.sql` in cloud/store/migrations/. Each runs in its own
transaction and is recorded (by the runner farmkit/migrations.py shares with the agent), with a
checksum of its text, in `schema_migrations`. The whole run holds a PostgreSQL advisory lock, so
instances starting together apply each file once: the second waits, then finds nothing left to
do. A recorded file whose text has changed since is an error rather than silently ignored, but
for a rewording of comments listed in `_REWORDED`: the text it replaced is accepted once and the
record takes the new checksum.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg

from farmkit.migrations import Migration, MigrationError, run_migrations
from farmkit.migrations import load_migrations as load_files

__all__ = [
    "MIGRATIONS_DIR",
    "Migration",
    "MigrationError",
    "apply_migrations",
    "load_migrations",
    "migrate",
]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

# Key of the advisory lock serializing migration runs within one database (any fixed bigint;
# this one is the ASCII of "farmmigr").
_LOCK_KEY = 0x6661726D6D696772

# Applied files whose comments were reworded later (the statements untouched): the checksum of
# the text before, by version. Their comments cited design notes the repository never held;
# they now cite docs/design.md.
_REWORDED: dict[int, str] = {
    2: "5901c628ac01ba41b07ea4a736c254f2fa664917e15e7c712582980aa178f3d5",
    3: "6437e8c15611d092c1dd314d87755314327dfd6d48dc3df2761a27639594d18a",
    5: "16405fd4dc4a369b9c8857cd2b1a93bbc23ff000af5299b35d2779abe8d50385",
    7: "75bfbeb496e23a696b54ec3a40c4c88c61b9b71c971e9f8ca100b964630a2c0c",
    8: "51983e37caddab22eb6a3eedc25c8ac3b1cc1058fc330556fb428a82f3844e6e",
    9: "ab41419b1c8bf2b8c01ac7220af46b755fbbeecbb18a17e2e184909fb5bf7711",
    25: "99ace7b31f3c72171ae21a33d107d0eb35355636439d873fb78235eb86b3ec4f",
    40: "6c92be8b4f8d006443f4583f2f9b40378332bb6c2856ed7f6253f8f22edcee0f",
    45: "f372769729ebb568840211c58c5b1e8a5f2a58d7887e62b00492851db076b679",
    55: "20bc8843b6196e6db69a6b7be969591ea6cef92f85b36888a8a8966e31f92945",
    98: "ca2ba39f5eeb61d44a0d963e590f98dfb17fa79879f7f04cc362b847a535cf3a",
}


class _Postgres:
    """The cloud's migration record: ``schema_migrations`` with each file's name and checksum."""

    def __init__(self, conn: asyncpg.Connection, io_timeout: float) -> None:
        self._conn = conn
        self._timeout = io_timeout
        self._names: dict[int, str] = {}

    async def recorded(self) -> dict[int, str]:
        await self._conn.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            timeout=self._timeout,
        )
        rows = await self._conn.fetch(
            "SELECT version, name, checksum FROM schema_migrations ORDER BY version",
            timeout=self._timeout,
        )
        self._names = {row["version"]: row["name"] for row in rows}
        return {row["version"]: row["checksum"] for row in rows}

    async def check(self, migration: Migration, recorded: str) -> None:
        if recorded == _REWORDED.get(migration.version):
            await self._conn.execute(
                "UPDATE schema_migrations SET checksum = $2 WHERE version = $1",
                migration.version,
                migration.checksum,
                timeout=self._timeout,
            )
        elif recorded != migration.checksum:
            raise MigrationError(
                f"migration {migration.version:04d}_{self._names[migration.version]} was changed"
                " after it was applied; add a new migration instead"
            )

    async def apply(self, migration: Migration) -> None:
        async with self._conn.transaction():
            await self._conn.execute(migration.sql, timeout=self._timeout)
            await self._conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                migration.checksum,
                timeout=self._timeout,
            )


def load_migrations(directory: Path = MIGRATIONS_DIR) -> tuple[Migration, ...]:
    """The cloud's migration files (farmkit.migrations.load_migrations checks them)."""
    return load_files(directory)


async def apply_migrations(
    conn: asyncpg.Connection,
    migrations: tuple[Migration, ...],
    *,
    io_timeout: float,
) -> list[int]:
    """Apply the migrations not yet recorded, in order; return the versions applied.

    `io_timeout` bounds each statement, including the wait for another instance's run.
    """
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY, timeout=io_timeout)
    try:
        return await run_migrations(migrations, _Postgres(conn, io_timeout), refuse_unknown=True)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY, timeout=io_timeout)


async def migrate(
    dsn: str,
    *,
    directory: Path = MIGRATIONS_DIR,
    io_timeout: float = 60.0,
) -> list[int]:
    """Connect as the schema owner, apply pending migrations, disconnect."""
    migrations = load_migrations(directory)
    # command_timeout also bounds the BEGIN and COMMIT around each file.
    conn = await asyncpg.connect(dsn, timeout=io_timeout, command_timeout=io_timeout)
    try:
        return await apply_migrations(conn, migrations, io_timeout=io_timeout)
    finally:
        await conn.close(timeout=io_timeout)
