"""``farm-cloud dev``: the cloud on a private PostgreSQL in a local directory.

The directory holds the cluster (``postgres/``), the generated database passwords
(``credentials.json``, mode 0600), the token-signing key and the key for secrets at rest. The
database is set up as docs/cloud-rls.md tells an operator: an ordinary owner role and database,
the migrations run as that owner, then LOGIN and a password for ``farm_app`` and ``farm_sync``.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from cloud.embedded.postgres import SUPERUSER, LocalPostgres
from cloud.store.migrations import migrate

__all__ = ["DevCloud", "DevDatabase", "DirectoryInUse"]

DATABASE = "farm"
OWNER_ROLE = "farm_owner"
SERVICE_ROLES = ("farm_app", "farm_sync")
_TIMEOUT = 60.0


class DirectoryInUse(RuntimeError):
    """Another ``farm-cloud dev`` runs on this directory."""


@dataclass(frozen=True)
class DevDatabase:
    """The DSNs of the three roles the cloud uses."""

    owner_dsn: str
    app_dsn: str
    sync_dsn: str


class DevCloud:
    """The local directory of a development cloud; :meth:`start` brings its database up."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._server: LocalPostgres | None = None
        self._lock: int | None = None

    @property
    def signing_key_path(self) -> Path:
        return self.root / "signing-key.pem"

    @property
    def secret_key_path(self) -> Path:
        return self.root / "secret.key"

    async def start(self) -> DevDatabase:
        """Create the cluster on first use, start it on a free port, and set the database up."""
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
        self._hold_directory()
        passwords = self._passwords()
        server = LocalPostgres(self.root / "postgres")
        if not server.initialized:
            server.init(passwords[SUPERUSER])
        server.start()
        self._server = server
        await self._provision(server, passwords)
        return DevDatabase(
            owner_dsn=server.dsn(DATABASE, OWNER_ROLE, passwords[OWNER_ROLE]),
            app_dsn=server.dsn(DATABASE, "farm_app", passwords["farm_app"]),
            sync_dsn=server.dsn(DATABASE, "farm_sync", passwords["farm_sync"]),
        )

    def stop(self) -> None:
        """Stop the cluster (its data stays for the next start)."""
        try:
            if self._server is not None:
                self._server.stop()
                self._server = None
        finally:
            if self._lock is not None:
                os.close(self._lock)  # releases the lock
                self._lock = None

    def _hold_directory(self) -> None:
        """Lock the directory for this process: a server found running there while we hold the
        lock was left by a killed process and is restarted; one we cannot lock is in use."""
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirectoryInUse(f"{self.root} is in use by another farm-cloud dev") from None
        self._lock = fd

    def _passwords(self) -> dict[str, str]:
        """The roles' passwords, generated at the first start and kept in the directory."""
        path = self.root / "credentials.json"
        if path.exists():
            stored: dict[str, str] = json.loads(path.read_text())
            return stored
        passwords = {
            role: secrets.token_urlsafe(18) for role in (SUPERUSER, OWNER_ROLE, *SERVICE_ROLES)
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(passwords, handle)
        return passwords

    async def _provision(self, server: LocalPostgres, passwords: dict[str, str]) -> None:
        superuser = server.dsn("postgres", SUPERUSER, passwords[SUPERUSER])
        conn = await asyncpg.connect(superuser, timeout=_TIMEOUT)
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", OWNER_ROLE):
                await conn.execute(
                    f"CREATE ROLE {OWNER_ROLE} LOGIN CREATEROLE PASSWORD "
                    f"{_literal(passwords[OWNER_ROLE])}"
                )
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
                await conn.execute(f"CREATE DATABASE {DATABASE} OWNER {OWNER_ROLE}")
        finally:
            await conn.close(timeout=10)
        await migrate(server.dsn(DATABASE, OWNER_ROLE, passwords[OWNER_ROLE]), io_timeout=_TIMEOUT)
        conn = await asyncpg.connect(superuser, timeout=_TIMEOUT)
        try:
            for role in SERVICE_ROLES:
                await conn.execute(f"ALTER ROLE {role} LOGIN PASSWORD {_literal(passwords[role])}")
        finally:
            await conn.close(timeout=10)


def _literal(text: str) -> str:
    """A SQL string literal of a generated password (URL-safe base64: no quote can occur)."""
    assert "'" not in text
    return f"'{text}'"
