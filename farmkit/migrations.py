"""The schema migration runner the agent (SQLite) and the cloud (PostgreSQL) share.

Migrations are numbered SQL files, ``NNNN_description.sql``, applied in number order. Numbers
come from blocks assigned to parallel work, so one below the newest applied may land later:
every migration not yet recorded is applied, whatever its number. How a migration is applied and
recorded, and what a recorded one is checked against, is the side's :class:`MigrationBackend`.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Protocol

__all__ = ["Migration", "MigrationBackend", "MigrationError", "load_migrations", "run_migrations"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


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
        """SHA-256 of the file's text."""
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def file_name(self) -> str:
        """``NNNN_description.sql``."""
        return f"{self.version:04d}_{self.name}.sql"


def load_migrations(directory: Path | Traversable) -> tuple[Migration, ...]:
    """Read the ``*.sql`` files of a directory (a package's resources too), checking names and
    numbering: increasing, each number once. Gaps are allowed (see the module's text)."""
    migrations: list[Migration] = []
    for entry in sorted(directory.iterdir(), key=lambda entry: entry.name):
        if not entry.name.endswith(".sql"):
            continue
        match = _NAME.match(entry.name)
        if match is None:
            raise MigrationError(f"{entry}: migration files are named NNNN_description.sql")
        text = entry.read_text(encoding="utf-8")
        migrations.append(Migration(int(match.group(1)), match.group(2), text))
    for before, migration in itertools.pairwise(migrations):
        if migration.version == before.version:
            raise MigrationError(f"{directory}: two migrations numbered {migration.version:04d}")
    if not migrations:
        raise MigrationError(f"{directory}: no migration files")
    return tuple(migrations)


class MigrationBackend(Protocol):
    """What the runner needs of one database."""

    async def recorded(self) -> Mapping[int, str]:
        """The versions recorded as applied, each with what was recorded of it (a checksum, or
        nothing)."""
        ...

    async def check(self, migration: Migration, recorded: str) -> None:
        """Accept an applied ``migration`` whose record says ``recorded``, or raise
        :class:`MigrationError`."""
        ...

    async def apply(self, migration: Migration) -> None:
        """Run ``migration`` and record it, in one transaction."""
        ...


async def run_migrations(
    migrations: Sequence[Migration],
    backend: MigrationBackend,
    *,
    refuse_unknown: bool = False,
) -> list[int]:
    """Apply the migrations ``backend`` has not recorded, in order; return the versions applied.

    With ``refuse_unknown`` a recorded version no file has is an error: a newer release
    migrated the database."""
    recorded = await backend.recorded()
    if refuse_unknown:
        unknown = sorted(set(recorded) - {m.version for m in migrations})
        if unknown:
            raise MigrationError(
                f"database has migrations {unknown} that this release does not know; "
                "it was migrated by a newer release"
            )
    applied: list[int] = []
    for migration in migrations:
        if migration.version in recorded:
            await backend.check(migration, recorded[migration.version])
            continue
        log.info("applying migration %s", migration.file_name)
        await backend.apply(migration)
        applied.append(migration.version)
    return applied
