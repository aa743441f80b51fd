"""The systemd notification protocol (sd_notify(3)): READY, WATCHDOG, STOPPING and STATUS.

A datagram of ``KEY=value`` lines to the AF_UNIX socket named by ``NOTIFY_SOCKET`` (a leading
``@`` names an abstract socket). Without that variable every call does nothing, so the agent
runs the same under systemd, in a terminal and in tests.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Notifier", "notifier_from_environment", "watchdog_interval"]

log = logging.getLogger(__name__)


@dataclass
class Notifier:
    """Sends notifications to one socket address, or nowhere when ``address`` is None."""

    address: str | bytes | None

    def __post_init__(self) -> None:
        self._socket: socket.socket | None = None
        if self.address is not None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._socket.setblocking(False)

    @property
    def enabled(self) -> bool:
        """Whether a service manager listens."""
        return self._socket is not None

    def send(self, **fields: str) -> None:
        """Send ``KEY=value`` lines (keys upper-cased); a failure is logged, never raised."""
        if self._socket is None or self.address is None:
            return
        text = "\n".join(f"{key.upper()}={value}" for key, value in fields.items())
        try:
            self._socket.sendto(text.encode(), self.address)
        except OSError as err:  # a full or vanished socket must not take the agent down
            log.warning("systemd notification failed: %s", err)

    def ready(self, status: str) -> None:
        """Start-up is complete: the store is open and the API listens."""
        self.send(ready="1", status=status)

    def status(self, status: str) -> None:
        """A line a person reads in ``systemctl status``."""
        self.send(status=status)

    def watchdog(self) -> None:
        """The service is alive and well."""
        self.send(watchdog="1")

    def stopping(self, status: str = "Stopping") -> None:
        """Shutdown has begun."""
        self.send(stopping="1", status=status)

    def close(self) -> None:
        """Close the socket."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def notifier_from_environment(environ: Mapping[str, str]) -> Notifier:
    """The notifier ``NOTIFY_SOCKET`` asks for (none when unset)."""
    path = environ.get("NOTIFY_SOCKET")
    if not path:
        return Notifier(None)
    if path.startswith("@"):
        return Notifier(b"\0" + path[1:].encode())
    return Notifier(path)


def watchdog_interval(environ: Mapping[str, str]) -> float | None:
    """Seconds between pings: half of ``WATCHDOG_USEC`` when the watchdog is meant for us."""
    usec = environ.get("WATCHDOG_USEC")
    pid = environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        log.warning("ignoring WATCHDOG_USEC=%r: not a number", usec)
        return None
    return value / 2_000_000 if value > 0 else None
