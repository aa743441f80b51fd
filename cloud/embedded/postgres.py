"""A private PostgreSQL cluster in a local directory, run with Debian's server binaries.

``initdb`` into ``<root>/data``, ``pg_ctl`` starts it on a 127.0.0.1 port with its unix socket in
``<root>/socket``; the machine's own server (5432) is never touched. initdb refuses to run as
root, so under euid 0 the binaries run as the ``postgres`` system user, which then owns the
directory (and must be able to reach it: keep it out of a private home directory).
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "DURABLE",
    "INSTALL_HINT",
    "THROWAWAY",
    "LocalPostgres",
    "PostgresCommandError",
    "PostgresUnavailable",
    "find_bin_dir",
    "free_port",
]

INSTALL_HINT = "install the PostgreSQL server: `apt-get install postgresql` (scripts/bootstrap)"
SUPERUSER = "postgres"
_COMMAND_TIMEOUT = 120.0
_START_ATTEMPTS = 3

# Server settings beyond address and port. Throw-away data (tests): durability only costs time.
THROWAWAY: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
}
DURABLE: Mapping[str, str] = {"max_connections": "100"}


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries or the account to run them as are missing."""


class PostgresCommandError(RuntimeError):
    """initdb or pg_ctl failed; the message carries their output and the server log."""


def find_bin_dir() -> Path:
    """Return the directory holding initdb, pg_ctl and postgres, newest version first."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)

    def version(path: str) -> int:
        match = re.search(r"/postgresql/(\d+)/", path)
        return int(match.group(1)) if match else 0

    installed = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    candidates += [Path(d) for d in installed]
    for directory in candidates:
        if all(os.access(directory / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresUnavailable(f"PostgreSQL binaries (initdb, pg_ctl) not found: {INSTALL_HINT}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class _RunAs:
    user: str
    uid: int
    gid: int


def _account() -> _RunAs | None:
    """The account to run the server as: None for the current one, `postgres` when root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError as err:
        raise PostgresUnavailable(
            f"running as root and there is no `postgres` system user to run initdb: {INSTALL_HINT}"
        ) from err
    return _RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)


class LocalPostgres:
    """One cluster in ``root``: :meth:`init` once, then :meth:`start` and :meth:`stop`."""

    def __init__(self, root: Path, settings: Mapping[str, str] = DURABLE) -> None:
        self.root = root
        self.bin_dir = find_bin_dir()
        self.port = 0
        self._settings = settings
        self._run_as = _account()

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"

    @property
    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    def dsn(self, database: str, user: str, password: str) -> str:
        """A libpq URL for this cluster over TCP on loopback."""
        return (
            f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}"
            f"@127.0.0.1:{self.port}/{quote(database, safe='')}"
        )

    def init(self, superuser_password: str) -> None:
        """Create the cluster: superuser ``postgres`` with this password, SCRAM over TCP."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        password_file = self.root / "superuser-password"
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(superuser_password + "\n")
        self._give(self.root, self.socket_dir, password_file)
        try:
            self._run(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                f"--pwfile={password_file}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
                "--no-instructions",
            )
        finally:
            password_file.unlink()

    def start(self, port: int | None = None) -> None:
        """Start the server on ``port`` (a free one if ``None``); wait until it accepts."""
        if self.running():
            # Left running by a process that was killed: start afresh with our settings.
            self.stop()
        for attempt in range(1, _START_ATTEMPTS + 1):
            self.port = port or free_port()
            self._configure()
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "start"
                )
                return
            except PostgresCommandError:
                # Another process may have taken the port between choosing and binding it.
                if port is not None or attempt == _START_ATTEMPTS:
                    raise

    def running(self) -> bool:
        """Whether a server runs on this data directory."""
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        try:
            self._run("pg_ctl", "-D", str(self.data_dir), "status")
        except PostgresCommandError:
            return False
        return True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions; ``immediate``: no checkpoint)."""
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")

    def _configure(self) -> None:
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            **self._settings,
        }
        # postgresql.auto.conf is read last, so these win over postgresql.conf.
        lines = [f"{key} = {value}" for key, value in settings.items()]
        auto_conf = self.data_dir / "postgresql.auto.conf"
        auto_conf.write_text("\n".join(lines) + "\n")
        self._give(auto_conf)

    def _give(self, *paths: Path) -> None:
        """Hand ``paths`` to the server's account when it is not ours."""
        if self._run_as is not None:
            for path in paths:
                os.chown(path, self._run_as.uid, self._run_as.gid)

    def _run(self, program: str, *args: str) -> None:
        run_as = self._run_as
        result = subprocess.run(
            [str(self.bin_dir / program), *args],
            cwd=self.root,  # the server account may not be able to read the caller's cwd
            user=run_as.uid if run_as else None,
            group=run_as.gid if run_as else None,
            extra_groups=[] if run_as else None,
            capture_output=True,
            text=True,
            timeout=_COMMAND_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            log = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            raise PostgresCommandError(
                f"{program} failed ({result.returncode}): {result.stderr.strip()}\n{log}"
            )
