"""Whether the system clock is synchronized, as the kernel or systemd-timesyncd says.

A Raspberry Pi has no real-time clock: it boots with the time fake-hwclock saved, often hours or
days behind, and NTP jumps it once a server answers. Two sources tell whether that happened:

- systemd-timesyncd touches ``/run/systemd/timesync/synchronized`` once it has set the clock
  (what ``systemd-time-wait-sync.service`` waits for; ``timesyncd.conf(5)``);
- the kernel clears ``STA_UNSYNC`` in ``adjtimex(2)``'s status once an NTP daemon disciplines the
  clock (chrony, ntpd, timesyncd all do), and sets it again when none has for a while.

The file wins where timesyncd runs (its directory exists); elsewhere the kernel decides.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable
from pathlib import Path

__all__ = ["TIMESYNCD_FILE", "SyncProbe", "kernel_synchronized", "probe_of", "system_probe"]

log = logging.getLogger(__name__)

SyncProbe = Callable[[], bool]
"""``True`` once the system clock is synchronized."""

TIMESYNCD_FILE = Path("/run/systemd/timesync/synchronized")
# <sys/timex.h>: the status bit the kernel keeps set while no NTP daemon disciplines the clock.
_STA_UNSYNC = 0x0040
_TIME_ERROR = 5


class _Timeval(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long))


class _Timex(ctypes.Structure):
    """``struct timex`` of <sys/timex.h> (glibc, 64-bit and 32-bit longs alike): the fields up
    to ``tai`` and the eleven reserved ints that pad it."""

    _fields_ = (
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    )


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, looked up once: ``find_library`` runs ``ldconfig -p`` (a process) per call,
    and the clock is looked at every few seconds."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


def kernel_synchronized() -> bool | None:
    """The kernel's view (``adjtimex`` with no modes: a read); ``None`` where it cannot say."""
    libc = _libc()
    if libc is None:
        return None
    try:
        timex = _Timex()
        state = libc.adjtimex(ctypes.byref(timex))
    except AttributeError:
        return None
    if state < 0:
        return None
    return state != _TIME_ERROR and not timex.status & _STA_UNSYNC


def system_probe(timesyncd_file: Path = TIMESYNCD_FILE) -> SyncProbe:
    """The probe for this machine: timesyncd's flag file where timesyncd runs, else the kernel
    (a system that cannot tell counts as synchronized: nothing is moved on a guess)."""

    def probe() -> bool:
        if timesyncd_file.parent.is_dir():
            return timesyncd_file.exists()
        kernel = kernel_synchronized()
        return True if kernel is None else kernel

    return probe


def probe_of(source: str) -> SyncProbe:
    """The probe a ``clock_sync_source`` setting names (see :class:`AgentSettings`)."""
    if source == "auto":
        return system_probe()
    if source == "kernel":
        return lambda: kernel_synchronized() is not False
    if source == "assume":
        return lambda: True
    flag = Path(source)
    return flag.exists
