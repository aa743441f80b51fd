"""A private Mosquitto broker for tests: free port on 127.0.0.1, own config and persistence dir."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import signal
import socket
from pathlib import Path

MOSQUITTO = Path("/usr/sbin/mosquitto")
INSTALL_HINT = "Mosquitto is required for these tests: apt-get install mosquitto"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Mosquitto:
    """Start, stop (gracefully or by SIGKILL) and restart one broker on a fixed port."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        if not MOSQUITTO.exists():
            raise RuntimeError(f"{MOSQUITTO} not found. {INSTALL_HINT}")
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
            "max_queued_messages 100000",
            f"log_dest file {self.log}",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:
            # Mosquitto drops root privileges to user "mosquitto" unless told otherwise; that
            # user could not write the persistence directory under the test's temp dir.
            lines.append(f"user {getpass.getuser()}")
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self._process is not None and self._process.returncode is None

    async def start(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Start the broker and wait until it accepts connections."""
        if self.running:
            raise RuntimeError("broker already running")
        self._process = await asyncio.create_subprocess_exec(
            str(MOSQUITTO),
            "-c",
            str(self.config),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with asyncio.timeout(timeout):
            while True:
                if not self.running:
                    raise RuntimeError(f"mosquitto exited at start-up:\n{self._log_tail()}")
                with contextlib.suppress(OSError):
                    _, writer = await asyncio.open_connection(self.host, self.port)
                    writer.close()
                    await writer.wait_closed()
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
