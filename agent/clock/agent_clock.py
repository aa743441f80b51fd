"""The agent's clock as the rest of the agent should read it (issue 30).

Until the system clock is synchronized (:mod:`agent.clock.probe`) the agent trusts
neither its wall clock nor the jump that NTP will make. Meanwhile:

- the cloud's answers tell its time (their ``Date`` header, or an error envelope's ``timestamp``
  to the millisecond); the estimate is kept against the monotonic clock, which no jump moves, so
  it stays right across one. Batches are signed with it, so sync needs no NTP;
- readings stamped on receipt take the estimated cloud time when there is one, and the wall
  clock otherwise. Each such stamp is remembered as an *era*: the offset between the stamp and
  the monotonic clock, and per series the first and last stamp given under it;
- once the clock is synchronized, the wall-minus-monotonic offset is the true one, and each era
  is moved by the difference (:class:`agent.store.readings.StampShift`), unless it is within
  ``tolerance_ms``.

Eras live in memory: a restart before the clock is set leaves the readings stamped before it
where they are (docs/operations.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.clock.probe import SyncProbe
from agent.store.readings import StampShift

__all__ = ["AgentClock", "Era"]

# The store gives a receive stamp the first free millisecond at or after it: a burst moves
# the last stamps a little past the last one noted here.
_STAMP_RUN_MS = 1000

log = logging.getLogger(__name__)


@dataclass
class Era:
    """Receive stamps given under one offset from the monotonic clock."""

    offset_ms: int
    """Stamp minus monotonic milliseconds."""
    series: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    """Per (device, metric): the first and last stamp given."""


class AgentClock:
    """Synchronized or not, the cloud's time, and the receive stamps to move once it is set."""

    def __init__(
        self,
        probe: SyncProbe,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        tolerance_ms: int = 500,
    ) -> None:
        self._probe = probe
        self._wall = wall
        self._monotonic = monotonic
        self._tolerance = tolerance_ms
        self._cloud_minus_mono: float | None = None
        self._resolution = float("inf")
        self._eras: list[Era] = []
        self._synchronized = self._probed()
        self._last_offset = self.wall_ms() - self._mono_ms()

    def _probed(self) -> bool:
        try:
            return bool(self._probe())
        except Exception:
            log.exception("clock synchronization probe failed; counting the clock as set")
            return True

    @property
    def synchronized(self) -> bool:
        """Whether the system clock was synchronized when last probed."""
        return self._synchronized

    def wall_ms(self) -> int:
        """The system clock, unix milliseconds."""
        return int(self._wall() * 1000)

    def _mono_ms(self) -> float:
        return self._monotonic() * 1000

    # The cloud's time ----------------------------------------------------------------------

    def learn_cloud_time(
        self, cloud_ms: float, asked_mono: float, answered_mono: float, *, resolution_ms: int = 0
    ) -> None:
        """The cloud said ``cloud_ms`` between ``asked_mono`` and ``answered_mono`` (monotonic
        seconds), to ``resolution_ms`` (a ``Date`` header: 1000, truncated). A reading no finer
        than the estimate that agrees with it within its resolution leaves it alone (so a
        ``Date`` header every batch does not make it wander by half a second)."""
        mid = (asked_mono + answered_mono) / 2 * 1000
        cloud_minus_mono = cloud_ms + resolution_ms / 2 - mid
        uncertainty = resolution_ms / 2 + (answered_mono - asked_mono) * 500
        known = self._cloud_minus_mono
        if (
            known is not None
            and uncertainty >= self._resolution
            and abs(known - cloud_minus_mono) <= uncertainty
        ):
            return
        self._cloud_minus_mono = cloud_minus_mono
        self._resolution = uncertainty

    def cloud_now_ms(self) -> int:
        """The cloud's time as best known (the system clock before any answer)."""
        if self._cloud_minus_mono is None:
            return self.wall_ms()
        return int(self._mono_ms() + self._cloud_minus_mono)

    def behind_cloud_s(self) -> float | None:
        """How far the system clock is behind the cloud's (negative: ahead), if known."""
        if self._cloud_minus_mono is None:
            return None
        return (self.cloud_now_ms() - self.wall_ms()) / 1000

    def describe(self) -> str:
        """The clock as /healthz says it."""
        if self._synchronized:
            return "synchronized"
        behind = self.behind_cloud_s()
        if behind is None:
            return "not synchronized, the cloud's time not known yet"
        if behind >= 0:
            return f"not synchronized, about {behind:.0f} s behind the cloud"
        return f"not synchronized, about {-behind:.0f} s ahead of the cloud"

    # Receive stamps ------------------------------------------------------------------------

    def receive_correction_ms(self) -> int:
        """What to add to a receive stamp taken from the system clock: the distance to the
        cloud's time while unsynchronized and the cloud has answered, else 0."""
        if self._synchronized or self._cloud_minus_mono is None:
            return 0
        return self.cloud_now_ms() - self.wall_ms()

    @property
    def trusted(self) -> bool:
        """Whether receive stamps are right: the clock is set, or the cloud's time is known."""
        return self._synchronized or self._cloud_minus_mono is not None

    def note_receipt(self, device_id: str, metric: str, ts: int) -> None:
        """A reading of (device, metric) was stamped ``ts`` on receipt, correction included;
        remembered while the clock is not synchronized, to be moved once it is."""
        if self._synchronized:
            return
        # The offset the stamp was given under, taken now: ``ts`` itself was taken on receipt,
        # possibly a while before the writer got to it.
        offset = self.wall_ms() + self.receive_correction_ms() - self._mono_ms()
        era = next((e for e in self._eras if abs(e.offset_ms - offset) <= self._tolerance), None)
        if era is None:
            era = Era(int(offset))
            self._eras.append(era)
        key = (device_id, metric)
        first, last = era.series.get(key, (ts, ts))
        era.series[key] = (min(first, ts), max(last, ts))

    def jumped_ms(self) -> int:
        """How far the wall clock jumped, against the monotonic clock, since last asked; 0
        within ``tolerance_ms`` (NTP slewing the clock never counts as a jump)."""
        offset = self.wall_ms() - self._mono_ms()
        jump, self._last_offset = offset - self._last_offset, offset
        return round(jump) if abs(jump) > self._tolerance else 0

    def move_due(self) -> bool:
        """Whether the clock has just been set and receive stamps given before wait to be moved
        by the next :meth:`refresh`: until then they must not leave for the cloud."""
        return bool(self._eras) and not self._synchronized and self._probed()

    def refresh(self) -> list[StampShift]:
        """Probe again; when the clock has just been set, what the stamps given before need,
        measured against the monotonic clock (the eras are then forgotten)."""
        was = self._synchronized
        self._synchronized = self._probed()
        if was or not self._synchronized:
            return []
        true_offset = self.wall_ms() - self._mono_ms()
        shifts = [
            StampShift(
                device_id, metric, first, last + _STAMP_RUN_MS, round(true_offset - era.offset_ms)
            )
            for era in self._eras
            if abs(true_offset - era.offset_ms) > self._tolerance
            for (device_id, metric), (first, last) in era.series.items()
        ]
        self._eras.clear()
        log.warning("system clock synchronized (%d series of readings stamped before to move)",
                    len(shifts))  # fmt: skip
        return shifts
