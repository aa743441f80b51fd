"""Schema migrations: numbered SQL files applied in order at start-up.

Files are named `NNNN_description.sql` in cloud/store/migrations/. Each runs in its own
transaction and is recorded, with a checksum of its text, in `schema_migrations`. The whole run
holds a PostgreSQL advisory lock, so instances starting together apply each file once: the
second waits, then finds nothing left to do. A recorded file whose text has changed since is an
error rather than silently ignored, but for a rewording of comments listed in `_REWORDED`:
the text it replaced is accepted once and the record takes the new checksum.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

__all__ = [
    "MIGRATIONS_DIR",
    "Migration",
    "MigrationError",
    "apply_migrations",
    "load_migrations",
    "migrate",
]

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

# Key of the advisory lock serializing migration runs within one database (any fixed bigint;
# this one is the ASCII of "farmmigr").
_LOCK_KEY = 0x6661726D6D696772
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

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


class MigrationError(RuntimeError):
    """The migration files or the recorded history are inconsistent."""


@dataclass(frozen=True)
class Migration:
    """One numbered SQL file."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the file's text, recorded when applied."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path = MIGRATIONS_DIR) -> tuple[Migration, ...]:
    """Read the migration files of a directory, checking names and numbering: increasing, each
    number once. Gaps are allowed: parallel work takes numbers from assigned blocks, and a
    missing number is applied whenever it lands (every unrecorded migration is applied in
    order)."""
    migrations: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise MigrationError(f"{path}: migration files are named NNNN_description.sql")
        migrations.append(Migration(int(match.group(1)), match.group(2), path.read_text()))
    for before, migration in itertools.pairwise(migrations):
        if migration.version == before.version:
            raise MigrationError(f"{directory}: two migrations numbered {migration.version:04d}")
    if not migrations:
        raise MigrationError(f"{directory}: no migration files")
    return tuple(migrations)


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
        await conn.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            timeout=io_timeout,
        )
        rows = await conn.fetch(
            "SELECT version, name, checksum FROM schema_migrations ORDER BY version",
            timeout=io_timeout,
        )
        recorded = {row["version"]: row for row in rows}
        known = {m.version for m in migrations}
        unknown = sorted(set(recorded) - known)
        if unknown:
            raise MigrationError(
                f"database has migrations {unknown} that this release does not know; "
                "it was migrated by a newer release"
            )
        applied: list[int] = []
        for migration in migrations:
            row = recorded.get(migration.version)
            if row is not None:
                if row["checksum"] == _REWORDED.get(migration.version):
                    await conn.execute(
                        "UPDATE schema_migrations SET checksum = $2 WHERE version = $1",
                        migration.version,
                        migration.checksum,
                        timeout=io_timeout,
                    )
                elif row["checksum"] != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{row['name']} was changed after "
                        "it was applied; add a new migration instead"
                    )
                continue
            logger.info("applying migration %04d_%s", migration.version, migration.name)
            async with conn.transaction():
                await conn.execute(migration.sql, timeout=io_timeout)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    migration.checksum,
                    timeout=io_timeout,
                )
            applied.append(migration.version)
        return applied
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
