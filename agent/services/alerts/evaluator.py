"""Threshold alerts over committed readings.

A rule watches one device's metric. A value beyond ``above`` (strictly greater) or ``below``
(strictly less) starts a breach; when readings stay beyond for ``min_duration_s`` ONE alert is
raised. It clears at the first reading back inside the threshold by ``hysteresis`` (below
``above - hysteresis``, above ``below + hysteresis``), so a value wavering at the threshold does
not flap. The clock is the readings' own ``ts``: a breach lasts from its first reading's time,
whatever the agent's wall clock says, and backfilled readings older than the newest one seen for
a rule are not evaluated.

Active alerts are stored and reloaded at start, so an alert outlives a restart; a breach still
pending (shorter than its minimum duration) is not, and starts again with the next reading.
Raise and clear are events (``alert_raised``/``alert_cleared``) sent to /ws/farm-status as type
``alert``; a client that connects later learns what is active from GET /api/v1/alerts?state=active.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.services.events.log import EventLog
from agent.services.readings.listeners import CommittedReading, ReadingSubscription
from agent.store.alerts import AlertStore, NewAlert
from agent.store.readings import StampShift
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog
from protocol.timefmt import iso

__all__ = ["AlertEvaluator", "Subscribe"]

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Subscribe = Callable[[int, Callable[[CommittedReading], bool]], ReadingSubscription]
"""``ReadingWriter.subscribe``: a bounded queue of committed readings passing a filter."""


@dataclass(frozen=True, slots=True)
class _Rule:
    id: str
    farm_id: str
    device_id: str
    metric: str
    name: str
    above: float | None
    below: float | None
    hysteresis: float
    min_duration_ms: int
    severity: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> _Rule:
        return cls(
            id=row["id"],
            farm_id=row["farm_id"],
            device_id=row["device_id"],
            metric=row["metric"],
            name=row["name"],
            above=row["above"],
            below=row["below"],
            hysteresis=row["hysteresis"],
            min_duration_ms=round(row["min_duration_s"] * 1000),
            severity=row["severity"],
        )

    def breach(self, value: float) -> tuple[str, float] | None:
        """The direction and threshold ``value`` is beyond, if any."""
        if self.above is not None and value > self.above:
            return "above", self.above
        if self.below is not None and value < self.below:
            return "below", self.below
        return None

    def back_inside(self, direction: str, value: float) -> bool:
        """Whether ``value`` clears an alert raised in ``direction``."""
        if direction == "above" and self.above is not None:
            return value < self.above - self.hysteresis
        if direction == "below" and self.below is not None:
            return value > self.below + self.hysteresis
        return True


@dataclass(slots=True)
class _Track:
    """What the evaluator knows of one rule between readings."""

    last_ts: int = -1
    pending: str | None = None
    """Direction of the breach under way, not raised yet."""
    since_ts: int = 0
    active_id: str | None = None
    active_direction: str | None = None


def _iso_ms(ms: int) -> str:
    return iso(_EPOCH + timedelta(milliseconds=ms))


class AlertEvaluator:
    """Evaluates committed readings against the enabled rules, from an owned task."""

    def __init__(
        self, store: AlertStore, events: EventLog, subscribe: Subscribe, *, queue_size: int
    ) -> None:
        self._store = store
        self._events = events
        self._subscribe = subscribe
        self._queue_size = queue_size
        self._rules: dict[str, _Rule] = {}
        self._by_series: dict[tuple[str, str], list[_Rule]] = {}
        self._tracks: dict[str, _Track] = defaultdict(_Track)
        self._lock = asyncio.Lock()
        self._subscription: ReadingSubscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._problems = ThrottledLog(log)

    async def start(self) -> None:
        """Load the rules and the active alerts, then follow committed readings."""
        async with self._lock:
            await self._load_rules()
            for alert in await self._store.active_alerts():
                if alert["rule_id"] is None:
                    continue
                track = self._tracks[alert["rule_id"]]
                track.active_id, track.active_direction = alert["id"], alert["direction"]
        self._subscription = self._subscribe(self._queue_size, self._wanted)
        self._task = asyncio.create_task(self._run(self._subscription), name="alert-evaluator")

    async def stop(self) -> None:
        """Stop following readings."""
        await cancel_and_wait(self._task)
        if self._task is not None:
            self._task = None
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    async def rule_changed(self, rule_id: str, reason: str) -> None:
        """A rule was changed or deleted: clear its active alert, forget its breach, reload."""
        async with self._lock:
            rule = self._rules.get(rule_id)
            track = self._tracks.pop(rule_id, None)
            if rule is not None and track is not None and track.active_id is not None:
                await self._clear(rule, track.active_id, None, None, reason)
            elif track is not None and track.active_id is not None:  # disabled before: no rule
                await self._store.clear_alert(track.active_id, iso(datetime.now(UTC)), None, reason)
            await self._load_rules()

    async def evaluate(self, reading: CommittedReading) -> None:
        """Apply one committed reading to the rules watching its series."""
        async with self._lock:
            for rule in self._by_series.get((reading.device_id, reading.metric), ()):
                await self._apply(rule, self._tracks[rule.id], reading)

    async def readings_moved(self, shifts: Sequence[StampShift]) -> None:
        """Readings stamped while the agent's clock was not set were moved (issue 30): a
        breach under way, and the newest time judged, move with them, so the jump counts
        neither as the breach's duration nor, backwards, as readings older than those judged.
        Readings committed before the move and still queued here carry their old times: they
        are judged first."""
        async with self._lock:
            while (
                self._subscription is not None
                and (queued := self._subscription.get_nowait()) is not None
            ):
                for rule in self._by_series.get((queued.device_id, queued.metric), ()):
                    await self._apply(rule, self._tracks[rule.id], queued)
            for shift in shifts:
                for rule in self._by_series.get((shift.device_id, shift.metric), ()):
                    track = self._tracks.get(rule.id)
                    if track is None:
                        continue
                    if shift.first_ts <= track.last_ts <= shift.last_ts:
                        track.last_ts += shift.delta_ms
                    if track.pending and shift.first_ts <= track.since_ts <= shift.last_ts:
                        track.since_ts += shift.delta_ms

    def _wanted(self, reading: CommittedReading) -> bool:
        return (reading.device_id, reading.metric) in self._by_series

    async def _load_rules(self) -> None:
        rules = [_Rule.of(row) for row in await self._store.enabled_rules()]
        self._rules = {rule.id: rule for rule in rules}
        by_series: dict[tuple[str, str], list[_Rule]] = defaultdict(list)
        for rule in rules:
            by_series[(rule.device_id, rule.metric)].append(rule)
        self._by_series = dict(by_series)

    async def _apply(self, rule: _Rule, track: _Track, reading: CommittedReading) -> None:
        if reading.ts < track.last_ts:
            return  # backfill: older than what this rule has already judged
        track.last_ts = reading.ts
        value = reading.value
        if track.active_id is not None and track.active_direction is not None:
            if not rule.back_inside(track.active_direction, value):
                return
            await self._clear(rule, track.active_id, reading.ts, value, "back_inside")
            track.active_id = track.active_direction = None
        breach = rule.breach(value)
        if breach is None:
            track.pending = None
            return
        direction, threshold = breach
        if track.pending != direction:
            track.pending, track.since_ts = direction, reading.ts
        if reading.ts - track.since_ts >= rule.min_duration_ms:
            await self._raise(rule, track, direction, threshold, reading)

    async def _raise(
        self, rule: _Rule, track: _Track, direction: str, threshold: float, r: CommittedReading
    ) -> None:
        row = await self._store.raise_alert(
            NewAlert(
                id=str(uuid.uuid4()),
                rule_id=rule.id,
                farm_id=rule.farm_id,
                device_id=rule.device_id,
                metric=rule.metric,
                direction=direction,
                threshold=threshold,
                severity=rule.severity,
                raised_at=_iso_ms(r.ts),
                raised_value=r.value,
            )
        )
        track.active_id, track.active_direction, track.pending = row["id"], direction, None
        label = rule.name or rule.metric
        self._events.record(
            rule.farm_id,
            rule.device_id,
            "alert_raised",
            rule.severity,
            f"{label} {r.value:g} {direction} {threshold:g}",
            dict(row),
            at=_EPOCH + timedelta(milliseconds=r.ts),
            stream_type="alert",
        )

    async def _clear(
        self, rule: _Rule, alert_id: str, ts: int | None, value: float | None, reason: str
    ) -> None:
        at = datetime.now(UTC) if ts is None else _EPOCH + timedelta(milliseconds=ts)
        row = await self._store.clear_alert(alert_id, iso(at), value, reason)
        if row is None:
            return
        label = rule.name or rule.metric
        self._events.record(
            rule.farm_id,
            rule.device_id,
            "alert_cleared",
            rule.severity,
            f"{label} cleared ({reason})",
            dict(row),
            at=at,
            stream_type="alert",
        )

    async def _run(self, subscription: ReadingSubscription) -> None:
        while True:
            reading = await subscription.get()
            try:
                await self.evaluate(reading)
            except asyncio.CancelledError:
                raise
            except Exception:
                # One bad evaluation (a locked database, a vanished farm) must not end alerting.
                self._problems.exception("evaluate", "alert evaluation failed")
                await asyncio.sleep(0.5)
