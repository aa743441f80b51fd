"""A NOTIFY_SOCKET that records what the agent tells systemd, read from a thread."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

__all__ = ["NotifyListener"]


class NotifyListener:
    """Receives sd_notify datagrams on a socket in ``directory``; each as a dict of fields."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "notify.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self.path))
        self._sock.settimeout(0.2)
        self.messages: list[dict[str, str]] = []
        self._changed = threading.Condition()
        self._open = True
        self._thread = threading.Thread(target=self._receive, name="notify-listener", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while self._open:
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self._changed:
                self.messages.append(fields)
                self._changed.notify_all()

    def wait_for(self, key: str, value: str | None = None, *, after: int = 0, timeout: float = 60):
        """Index of the first message from ``after`` on with ``key`` (= ``value``); a hung
        agent fails the test after ``timeout`` seconds rather than stalling it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for index in range(after, len(self.messages)):
                    found = self.messages[index].get(key)
                    if found is not None and (value is None or found == value):
                        return index
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {key}={value} after message {after}: {self.messages}")
                self._changed.wait(left)

    def close(self) -> None:
        """Stop listening."""
        self._open = False
        self._thread.join(5)
        self._sock.close()
