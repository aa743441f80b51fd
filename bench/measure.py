"""What every benchmark measures the same way: percentiles, CPU time, load, and failures.

- **Percentiles** are nearest-rank: the p-th percentile of n values is the value at rank
  ``ceil(p / 100 x n)`` of the sorted values (the smallest value that at least p % of the values
  are at or below). It is always one of the measured values, never an interpolation. A value
  that never came (a missed reading, a lost answer) is passed as ``math.inf``: it sorts last, so
  a p99 over a run that lost more than 1 % of its answers is infinite, printed as "inf".
  wrk's percentiles (bench/support.py) are its HdrHistogram's value at the percentile: the same
  nearest rank, at the histogram's three significant digits.
- **CPU time** is read from ``/proc/PID/stat`` (utime + stime, every thread of the process);
  for a process whose work is done by children (PostgreSQL's postmaster and its backends) the
  children are added: those still running, and those ended (cutime + cstime, which the kernel
  adds to the parent once it has waited for them).
- **Load average** is printed when a run starts and when it ends: on a shared machine a wall-time
  figure is an upper bound, a CPU-time figure much less so.
- **One failure rule**: any answer outside 2xx, any request that timed out or failed at the socket,
  any message lost counts against the run. :class:`Run` prints every failure counted, and the
  run's last line is ``FAILED: ...`` and its exit status 1 when there was one; a run without
  any ends with ``failures: none``.
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CpuMeter",
    "Failures",
    "Run",
    "cpu_seconds",
    "load_average",
    "percentile",
    "spread",
]

_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p <= 100) of ``values``; NaN if there are none."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[min(len(ordered), max(1, rank)) - 1]


def spread(values: Iterable[float], unit: str = "ms") -> str:
    """``p50 X, p99 Y, max Z <unit> over N``: the figures every latency line prints."""
    ordered = sorted(values)
    if not ordered:
        return "no values"
    p50, p99 = percentile(ordered, 50), percentile(ordered, 99)
    return (
        f"p50 {p50:.1f} {unit}, p99 {p99:.1f} {unit}, max {ordered[-1]:.1f} {unit}"
        f" over {len(ordered):,}"
    )


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    return text[text.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat_fields(int(entry.name))[1]) == pid:  # field 4: ppid
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # ended meanwhile
    return found


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU seconds of ``pid`` so far (all its threads); with ``children``, of its
    children too, running (recursively) or ended and waited for."""
    fields = _stat_fields(pid)
    # After the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime (proc(5), fields 14-17).
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
        seconds = ticks / _TICKS
        for child in _children(pid):
            try:
                seconds += cpu_seconds(child, children=True)
            except (OSError, ValueError, IndexError):
                continue  # ended meanwhile: its time is in cutime at the next reading
        return seconds
    return ticks / _TICKS


@dataclass
class CpuMeter:
    """CPU seconds of named processes (a name may stand for several, summed) between
    :meth:`start` and :meth:`stop`; those named in ``with_children`` with their children."""

    pids: dict[str, int | tuple[int, ...]]
    with_children: frozenset[str] = frozenset()
    seconds: dict[str, float] = field(default_factory=dict)

    def _now(self) -> dict[str, float]:
        return {
            name: sum(
                cpu_seconds(pid, children=name in self.with_children)
                for pid in (pids if isinstance(pids, tuple) else (pids,))
            )
            for name, pids in self.pids.items()
        }

    def start(self) -> CpuMeter:
        """Take the starting readings."""
        self.seconds = {name: -value for name, value in self._now().items()}
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds of each process since :meth:`start`."""
        for name, value in self._now().items():
            self.seconds[name] += value
        return self.seconds

    def per_thousand(self, count: int) -> str:
        """``name X ms, ...``: CPU milliseconds of each per 1,000 of ``count`` things."""
        return ", ".join(
            f"{name} {value * 1e6 / max(count, 1):.1f} ms" for name, value in self.seconds.items()
        )


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages and the cores, as printed."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


@dataclass
class Failures:
    """Everything that counts against a run, by kind (``HTTP 503``, ``timeout``, ``lost``...)."""

    counts: Counter[str] = field(default_factory=Counter)

    def answer(self, status: int, what: str = "") -> bool:
        """Count an HTTP answer; whether it was 2xx."""
        if 200 <= status < 300:
            return True
        self.counts[f"{what} HTTP {status}".strip()] += 1
        return False

    def add(self, kind: str, count: int = 1) -> None:
        """Count ``count`` failures of ``kind`` (``timeout``, ``lost``, ``socket error``...)."""
        if count:
            self.counts[kind] += count

    @property
    def total(self) -> int:
        """How many failures were counted."""
        return sum(self.counts.values())

    def line(self) -> str:
        """The run's last line: ``FAILED: ...`` or ``failures: none``."""
        if not self.total:
            return "failures: none"
        return "FAILED: " + ", ".join(f"{kind} x{n:,}" for kind, n in sorted(self.counts.items()))


@dataclass
class Run:
    """A benchmark run: its load at start and end, its failures and its exit status."""

    failures: Failures = field(default_factory=Failures)
    load_at_start: str = field(default_factory=load_average)

    @contextmanager
    def reported(self) -> Iterator[Run]:
        """Print the load at start; at the end, the load, the failures and exit 1 on any."""
        print(f"load average at start: {self.load_at_start}", flush=True)
        yield self
        print(f"load average at end: {load_average()}")
        print(self.failures.line(), flush=True)
        if self.failures.total:
            sys.exit(1)
