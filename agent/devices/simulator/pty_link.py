"""A pseudo-terminal pair standing in for a USB serial adapter, served in the event loop.

The agent opens `path`, a symlink to the pty's slave device, the way a real agent opens a stable
/dev/serial/by-id/ link. `unplug()` closes the pty so the agent's reads fail and the path
disappears; `plug()` creates a new pty and points the link at it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tty
from collections.abc import Callable
from pathlib import Path

__all__ = ["PtyLink"]

logger = logging.getLogger(__name__)

# A real UART drops bytes nobody reads; cap what we hold when the agent side is not reading.
_MAX_PENDING = 4096


class PtyLink:
    """The device end of a pseudo-terminal pair, exchanging terminated lines."""

    def __init__(
        self,
        path: Path,
        on_line: Callable[[str], None],
        terminator: bytes = b"\r",
    ) -> None:
        self.path = path
        self._on_line = on_line
        self._terminator = terminator
        self._master: int | None = None
        self._slave: int | None = None
        self._tty_path: str | None = None
        self._received = bytearray()
        self._pending = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def plugged(self) -> bool:
        """Whether the pty exists (the adapter is plugged in)."""
        return self._master is not None

    @property
    def tty_path(self) -> str | None:
        """The pty slave device (/dev/pts/N) while plugged."""
        return self._tty_path

    def plug(self) -> None:
        """Create the pty and point `path` at its slave device."""
        if self._master is not None:
            return
        self._loop = asyncio.get_running_loop()
        master, slave = os.openpty()
        # Raw mode: no echo and no CR/NL translation, like a UART; the agent sets it again.
        tty.setraw(slave)
        os.set_blocking(master, False)
        # Keeping our own slave fd open stops reads on the master failing with EIO whenever the
        # agent closes its side (for example while it reopens after an error).
        self._master, self._slave = master, slave
        self._tty_path = os.ttyname(slave)
        tmp = self.path.with_name(self.path.name + ".new")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(self._tty_path)
        tmp.replace(self.path)
        self._loop.add_reader(master, self._read_ready)
        logger.debug("pty plugged: %s -> %s", self.path, self._tty_path)

    def unplug(self) -> None:
        """Close the pty: the agent's port fails and the path goes away."""
        master, slave = self._master, self._slave
        self._master = self._slave = self._tty_path = None
        self._received.clear()
        self._pending.clear()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if master is None or self._loop is None:
            return
        self._loop.remove_reader(master)
        self._loop.remove_writer(master)
        os.close(master)
        if slave is not None:
            os.close(slave)
        logger.debug("pty unplugged: %s", self.path)

    def write_line(self, text: str) -> None:
        """Send one line to the agent (dropped while unplugged, like a dead wire)."""
        if self._master is None:
            return
        self._pending.extend(text.encode("ascii") + self._terminator)
        del self._pending[:-_MAX_PENDING]
        self._write_ready()

    def _write_ready(self) -> None:
        master = self._master
        if master is None or self._loop is None:
            return
        try:
            written = os.write(master, self._pending)
        except BlockingIOError:
            written = 0
        except OSError as err:
            logger.debug("pty write failed: %s", err)
            self._pending.clear()
            written = 0
        del self._pending[:written]
        if self._pending:
            self._loop.add_writer(master, self._write_ready)
        else:
            self._loop.remove_writer(master)

    def _read_ready(self) -> None:
        master = self._master
        if master is None:
            return
        try:
            data = os.read(master, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            logger.debug("pty read failed: %s", err)
            return
        self._received.extend(data)
        while (end := self._received.find(self._terminator)) >= 0:
            raw = bytes(self._received[:end])
            del self._received[: end + len(self._terminator)]
            line = raw.decode("ascii", errors="replace").strip()
            if line:
                self._on_line(line)
