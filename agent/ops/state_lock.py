"""One agent per state directory: a running agent holds an exclusive lock on ``agent.lock``."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["StateInUse", "hold_state"]


class StateInUse(Exception):
    """Another process (a running agent) holds the state directory."""


@contextmanager
def hold_state(state_dir: Path) -> Iterator[None]:
    """Hold the state directory's lock for the block, or raise :class:`StateInUse` at once."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / "agent.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            raise StateInUse(
                f"{state_dir} is in use by a running agent (stop it first: "
                "sudo systemctl stop farm-agent)"
            ) from err
        yield
    finally:
        os.close(fd)
