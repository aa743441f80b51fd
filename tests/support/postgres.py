"""A private, throw-away PostgreSQL cluster for tests.

initdb into a temporary directory, start it with pg_ctl on a free 127.0.0.1 port with its unix
socket inside that directory, and delete everything on stop. The machine's own server (5432) is
never touched. initdb refuses to run as root, so under euid 0 the binaries run as the `postgres`
system user, which owns the temporary directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

INSTALL_HINT = "install the PostgreSQL server with `apt-get install postgresql`"
SUPERUSER = "postgres"
SUPERUSER_PASSWORD = "test-superuser-password"
_COMMAND_TIMEOUT = 120.0
_START_ATTEMPTS = 3


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries or the account to run them as are missing."""


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


def _free_port() -> int:
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


class PostgresCluster:
    """A running private cluster; `start()` makes one, `stop()` removes it."""

    def __init__(self, root: Path, bin_dir: Path, port: int, run_as: _RunAs | None) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.port = port
        self._run_as = run_as

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"

    @classmethod
    def start(cls) -> PostgresCluster:
        """Create, configure and start a cluster; fail with an install hint when impossible."""
        bin_dir = find_bin_dir()
        run_as = _account()
        root = Path(tempfile.mkdtemp(prefix="farm-pg-"))
        try:
            cluster = cls(root, bin_dir, _free_port(), run_as)
            cluster._init()
            cluster._start_on_free_port()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cluster

    def dsn(
        self,
        database: str = "postgres",
        user: str = SUPERUSER,
        password: str = SUPERUSER_PASSWORD,
    ) -> str:
        """A libpq URL for this cluster over TCP on loopback."""
        return (
            f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}"
            f"@127.0.0.1:{self.port}/{quote(database, safe='')}"
        )

    def stop(self) -> None:
        """Stop the server at once and delete its directory."""
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _init(self) -> None:
        self.socket_dir.mkdir()
        password_file = self.root / "superuser-password"
        password_file.write_text(SUPERUSER_PASSWORD + "\n")
        if self._run_as is not None:
            for path in (self.root, self.socket_dir, password_file):
                os.chown(path, self._run_as.uid, self._run_as.gid)
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
        password_file.unlink()

    def _configure(self) -> None:
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            # Throw-away data: durability only costs time here.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "100",
        }
        # postgresql.auto.conf is read last, so these win over postgresql.conf.
        lines = [f"{key} = {value}" for key, value in settings.items()]
        auto_conf = self.data_dir / "postgresql.auto.conf"
        auto_conf.write_text("\n".join(lines) + "\n")
        if self._run_as is not None:
            os.chown(auto_conf, self._run_as.uid, self._run_as.gid)

    def _start_on_free_port(self) -> None:
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._configure()
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "start"
                )
                return
            except PostgresCommandError:
                # Another process may have taken the port between choosing and binding it.
                if attempt == _START_ATTEMPTS:
                    raise
                self.port = _free_port()

    def _run(self, program: str, *args: str) -> None:
        run_as = self._run_as
        result = subprocess.run(
            [str(self.bin_dir / program), *args],
            cwd=self.root,  # the server account may not be able to read root's cwd
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


class PostgresCommandError(RuntimeError):
    """initdb or pg_ctl failed; the message carries their output and the server log."""
