"""A private, throw-away PostgreSQL cluster for tests.

The cluster is the cloud's own embedded one (cloud/embedded/postgres.py) in a temporary directory,
with durability off, deleted on stop. The machine's own server (5432) is never touched.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from cloud.embedded.postgres import (
    INSTALL_HINT,
    SUPERUSER,
    THROWAWAY,
    LocalPostgres,
    PostgresCommandError,
    PostgresUnavailable,
)

__all__ = [
    "INSTALL_HINT",
    "SUPERUSER",
    "SUPERUSER_PASSWORD",
    "PostgresCluster",
    "PostgresCommandError",
    "PostgresUnavailable",
]

SUPERUSER_PASSWORD = "test-superuser-password"


class PostgresCluster:
    """A running private cluster; `start()` makes one, `stop()` removes it."""

    def __init__(self, server: LocalPostgres) -> None:
        self._server = server

    @property
    def root(self) -> Path:
        return self._server.root

    @property
    def port(self) -> int:
        return self._server.port

    @classmethod
    def start(cls) -> PostgresCluster:
        """Create, configure and start a cluster; fail with an install hint when impossible."""
        root = Path(tempfile.mkdtemp(prefix="farm-pg-"))
        try:
            server = LocalPostgres(root, THROWAWAY)
            server.init(SUPERUSER_PASSWORD)
            server.start()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(server)

    def dsn(
        self,
        database: str = "postgres",
        user: str = SUPERUSER,
        password: str = SUPERUSER_PASSWORD,
    ) -> str:
        """A libpq URL for this cluster over TCP on loopback."""
        return self._server.dsn(database, user, password)

    def halt(self) -> None:
        """Stop the server as an operator's restart does (open transactions roll back), keeping
        its data; :meth:`resume` starts it again on the same port."""
        self._server.stop("fast")

    def resume(self) -> None:
        """Start the server halted by :meth:`halt` again, on the same port."""
        self._server.start(self.port)

    def stop(self) -> None:
        """Stop the server at once and delete its directory."""
        try:
            self._server.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
