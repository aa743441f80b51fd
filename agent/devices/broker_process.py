"""A private Mosquitto broker in a child process: its own port on 127.0.0.1, config and
persistence directory. The demo starts one when no broker answers; tests and benchmarks too.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shutil
import signal
import socket
from pathlib import Path

__all__ = ["INSTALL_HINT", "MosquittoProcess", "broker_reachable", "free_port", "mosquitto_binary"]

INSTALL_HINT = "Mosquitto is required: apt-get install mosquitto"


def mosquitto_binary() -> Path:
    """The mosquitto executable (Debian installs it in /usr/sbin, often not on PATH)."""
    found = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RuntimeError(f"mosquitto not found. {INSTALL_HINT}")
    return Path(found)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def broker_reachable(host: str, port: int, timeout: float = 1.0) -> bool:  # noqa: ASYNC109
    """Whether something accepts TCP connections at host:port within ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class MosquittoProcess:
    """Start, stop (gracefully or by SIGKILL) and restart one broker on a fixed port."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.binary = mosquitto_binary()
        self.workdir = workdir
        self.port = port or free_port()
        self.config = workdir / "mosquitto.conf"
        self.log = workdir / "mosquitto.log"
        self._process: asyncio.subprocess.Process | None = None
        persistence = workdir / "persistence"
        persistence.mkdir(parents=True, exist_ok=True)
        lines = [
            f"listener {self.port} {self.host}",
            "allow_anonymous true",
            "persistence true",
            f"persistence_location {persistence}/",
            # Saved on a clean shutdown only: a SIGKILL loses in-memory state, like a crash.
            "autosave_interval 0",
            # The agent acknowledges a QoS 1 message once its readings are committed: the
            # in-flight window must cover a commit's worth of messages, and the session's queue
            # holds what a busy or restarting agent has not taken yet (over it, Mosquitto drops).
            "max_inflight_messages 1000",
            "max_queued_messages 1000000",
            # Nagle's algorithm would hold a command's small PUBLISH or PUBACK behind the
            # previous one's delayed TCP ACK (about 40 ms on Linux).
            "set_tcp_nodelay true",
            f"log_dest file {self.log}",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:
            # Mosquitto drops root privileges to user "mosquitto" unless told otherwise; that
            # user could not write the persistence directory under our working directory.
            lines.append(f"user {getpass.getuser()}")
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self._process is not None and self._process.returncode is None

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    async def start(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Start the broker and wait until it accepts connections."""
        if self.running:
            raise RuntimeError("broker already running")
        self._process = await asyncio.create_subprocess_exec(
            str(self.binary),
            "-c",
            str(self.config),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            # Out of the terminal's process group: a Ctrl-C meant for the agent would stop the
            # broker under the agent's still connected clients; the agent stops it last.
            start_new_session=True,
        )
        async with asyncio.timeout(timeout):
            while True:
                if not self.running:
                    raise RuntimeError(f"mosquitto exited at start-up:\n{self._log_tail()}")
                if await broker_reachable(self.host, self.port, timeout=1.0):
                    return
                await asyncio.sleep(0.02)

    async def stop(self, *, kill: bool = False, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Stop the broker: SIGTERM saves persistence, ``kill=True`` (SIGKILL) loses it."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        async with asyncio.timeout(timeout):
            await process.wait()

    async def restart(self, *, kill: bool = False) -> None:
        """Stop and start again on the same port."""
        await self.stop(kill=kill)
        await self.start()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
