"""The agent process's own storage writes, as the kernel counts them (Linux /proc/self/io).

On a Raspberry Pi the SD card wears by the bytes written to it; the operator watches them on
/metrics. ``write_bytes`` is what reached the storage layer (page cache write-back included);
``wchar`` is what the process handed to write() and its kin, cached or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcessIo", "process_io"]


@dataclass(frozen=True, slots=True)
class ProcessIo:
    """Cumulative bytes since the process started."""

    write_bytes: int
    wchar: int


def process_io(path: Path = Path("/proc/self/io")) -> ProcessIo | None:
    """The counters now; None where /proc does not provide them (not Linux, or restricted)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    try:
        return ProcessIo(int(fields["write_bytes"]), int(fields["wchar"]))
    except (KeyError, ValueError):
        return None
