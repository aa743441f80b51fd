"""The durable ingest path: validate, calibrate, batch, commit, then fan out.

Device adapters hand decoded readings to :meth:`ReadingWriter.submit`, which never waits: it
checks the value, applies the series' active calibration and queues the reading. One owned task
commits the queue by group commit: whatever is queued when the previous commit has finished (up
to ``max_batch``) goes into the next ``synchronous=FULL`` transaction, at most one commit every
``min_commit_interval`` and no reading waiting longer than ``batch_interval`` (longer while no
tablet watches readings live); only then are the stored readings offered to listeners. A
commit rewrites whole pages however few readings it holds, so a batch also waits for
``commit_rows`` readings (up to ``batch_interval``): at a thin trickle commits are as rare as
that allows, under a burst they follow each other at once.
NaN, infinities, out-of-range values and impossible timestamps are counted and logged at a
limited rate and never stored.

The writer is also the MQTT client's commit barrier: every queued reading takes the next
position, :meth:`ReadingWriter.outcome` tells whether the readings between two positions are
committed (:meth:`ReadingWriter.progress` waits for the next ones to finish), and
:meth:`ReadingWriter.room` makes a producer wait while the queue is nearly full. A QoS 1 message
is acknowledged only after that, so overload slows the broker instead of dropping readings.

A commit the storage refuses for lack of space (a full card, the database's size cap) is not a
lost batch: it is retried with back-off for as long as it takes (``stalled_since`` says since
when), the queue fills and :meth:`ReadingWriter.room` holds the MQTT client, whose unacknowledged
messages wait in the broker; ingest resumes by itself within seconds of room coming back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agent.clock import AgentClock
from agent.devices.calibration import LinearCalibration, apply
from agent.devices.codec import Measurement
from agent.services.readings.listeners import CommittedReading, ListenerSet, ReadingSubscription
from agent.store.readings import NewReading, ReadingStore, WriteOutcome
from agent.store.space import SPACE_RETRY, out_of_space
from farmkit.backoff import Backoff
from farmkit.throttled_log import ThrottledLog
from protocol.records import record

__all__ = [
    "CalibrationProvider",
    "IncomingReading",
    "ReadingWriter",
    "WriterStats",
    "incoming",
    "to_ms",
]

log = logging.getLogger(__name__)

CalibrationProvider = Callable[[str, str], LinearCalibration | None]
"""``(device_id, metric)`` to the active calibration, or None; an in-memory lookup."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_DAY_MS = 86_400_000
# Queue places kept free for whoever waits in room(): more than one message's readings.
_ROOM = 100
_FAILURES_KEPT = 1000


def to_ms(moment: datetime) -> int:
    """Unix milliseconds of an aware datetime, without float rounding."""
    return (moment - _EPOCH) // _MS


@record
class IncomingReading:
    """A decoded reading on its way in; times are unix milliseconds."""

    device_id: str
    metric: str
    unit: str
    value: float
    received_ts: int
    device_ts: int | None = None
    valid_range: tuple[float, float] | None = None
    """Inclusive bounds for the stored (calibrated) value; outside them it is rejected."""


def incoming(
    device_id: str,
    measurement: Measurement,
    received_ms: int,
    valid_range: tuple[float, float] | None = None,
) -> IncomingReading:
    """An :class:`IncomingReading` from a decoded device measurement received at
    ``received_ms`` (unix milliseconds: :func:`to_ms` once for all of a message's readings)."""
    device_time = measurement.device_time
    return IncomingReading(
        device_id,
        measurement.metric,
        measurement.unit,
        measurement.value,
        received_ms,
        None if device_time is None else to_ms(device_time),
        valid_range,
    )


COMMIT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class CommitTimes:
    """How long reading commits took: counts per upper bound (seconds), for /metrics."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(COMMIT_BUCKETS_S) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one commit of ``seconds``."""
        self.total_s += seconds
        index = next((i for i, b in enumerate(COMMIT_BUCKETS_S) if seconds <= b), -1)
        self.counts[index] += 1


@dataclass
class WriterStats:
    """Exact counters; the log is rate-limited, these are not."""

    accepted: int = 0
    committed: int = 0
    duplicates: int = 0
    unknown_device: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    device_clock_ahead: int = 0
    """Device times too far ahead of the receive time, replaced by the receive time."""
    queue_full: int = 0
    closed: int = 0
    lost: int = 0
    """Readings in batches that failed every commit attempt."""
    commits: int = 0
    commit_times: CommitTimes = field(default_factory=CommitTimes)
    commit_failures: int = 0
    space_refusals: int = 0
    """Commits refused for lack of space (each retried until it succeeds)."""


@dataclass(frozen=True, slots=True)
class _Marker:
    done: asyncio.Future[None]
    stop: bool = False


class ReadingWriter:
    """Batches readings into durable transactions and fans committed ones out."""

    def __init__(
        self,
        store: ReadingStore,
        *,
        calibration: CalibrationProvider | None = None,
        batch_interval: float = 1.0,
        min_commit_interval: float = 0.02,
        commit_rows: int = 1,
        max_batch: int = 2000,
        busy_batch: int = 200,
        busy: Callable[[], bool] | None = None,
        quiet_batch: int | None = None,
        quiet: Callable[[], bool] | None = None,
        watched: Callable[[], bool] | None = None,
        unwatched_interval: float | None = None,
        max_queue: int = 20_000,
        clock_skew_ms: int = 2000,
        clock: AgentClock | None = None,
        max_age_ms: int = 30 * _DAY_MS,
        max_ahead_ms: int = _DAY_MS,
        commit_attempts: int = 5,
        retry_delay: float = 0.5,
        stop_timeout: float = 10.0,
        log_interval: float = 60.0,
    ) -> None:
        self._store = store
        self._calibration = calibration
        self._interval = batch_interval
        # Group commit: a batch commits as soon as the previous one is done, but no sooner than
        # this after it began, which bounds the fsync rate an SD card has to sustain.
        self._min_interval = min_commit_interval
        self._commit_rows = max(commit_rows, 1)
        self._max_batch = max_batch
        # While a request is being answered (``busy``), batches are cut at ``busy_batch``: a
        # write of that request (a command record) then waits for a short batch, not for
        # thousands of readings and their triggers on the database's thread.
        self._busy_batch = min(busy_batch, max_batch)
        self._busy = busy
        # While nobody has asked the agent anything for a while (``quiet``), batches grow to
        # ``quiet_batch``: fewer commits and fewer hops per reading, more ingest at saturation.
        # Once requests come, a command record would wait behind such a batch: back to
        # ``max_batch``.
        self._quiet_batch = max(quiet_batch or max_batch, max_batch)
        self._quiet = quiet
        # While nobody watches readings live (``watched``: a tablet on the stream), a batch
        # may wait ``unwatched_interval``: a farm at night commits less often, and every
        # commit rewrites whole pages of the SD card.
        self._watched = watched
        self._unwatched_interval = max(unwatched_interval or batch_interval, batch_interval)
        self._max_queue = max_queue
        self._skew_ms = clock_skew_ms
        self._clock = clock
        # Older readings would land where raw rows are already pruned, so a duplicate could no
        # longer be recognised and would be counted twice in the rollups.
        self._max_age_ms = max_age_ms
        self._max_ahead_ms = max_ahead_ms
        self._attempts = max(commit_attempts, 1)
        self._retry_delay = retry_delay
        self._stop_timeout = stop_timeout
        self._problems = ThrottledLog(log, log_interval)
        # Unbounded as a container so flush/stop markers always fit; submit() enforces the bound.
        # A deque and an event, not an asyncio.Queue (whose put wakes getters one call at a
        # time, for every reading).
        self._queue: collections.deque[NewReading | _Marker] = collections.deque()
        self._arrived = asyncio.Event()
        # The commit task is woken once this many items are queued (or a marker is): while a
        # batch waits for ``commit_rows`` readings, not by every reading on the way.
        self._wake_len = 1
        self._markers = 0
        self._queued = 0
        # Every reading offered takes a position. Queued ones are committed in position order
        # (``_finished`` is the last one done); refused ones (queue full, writer stopped) and
        # lost batches are recorded as failed (start, end] ranges.
        self._position = 0
        self._last_queued = 0
        self._positions: collections.deque[int] = collections.deque()
        self._finished = 0
        self._failed: list[tuple[int, int]] = []
        # Set, and replaced by a new one, each time queued readings are finished.
        self._progressed = asyncio.Event()
        self._has_room = asyncio.Event()
        self._has_room.set()
        # The loop time at which the batch being gathered closes (None: no batch is open), and
        # whether the last batch closed on its interval with fewer than ``commit_rows``
        # readings (a trickle) rather than on its size (a burst).
        self._closes_at: float | None = None
        self._trickle = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.stalled_since: float | None = None
        """Unix time since which the batch being committed is refused for lack of space."""
        self.stats = WriterStats()
        self.listeners = ListenerSet(log_interval)

    def subscribe(
        self, maxsize: int = 1000, accept: Callable[[CommittedReading], bool] | None = None
    ) -> ReadingSubscription:
        """Receive readings once they are committed (bounded queue; drops when full)."""
        return self.listeners.subscribe(maxsize, accept)

    def submit(self, reading: IncomingReading) -> bool:
        """Validate, calibrate and queue one reading without waiting; True if it was queued."""
        if self._closed:
            self.stats.closed += 1
            self._refused()
            self._problems.warning("closed", "reading writer is stopped: reading dropped")
            return False
        prepared = self._prepare(reading)
        if prepared is None:
            return False
        if self._queued >= self._max_queue:
            self.stats.queue_full += 1
            self._refused()
            self._problems.error(
                "queue-full", "reading queue full (%d): reading dropped", self._max_queue
            )
            return False
        self._queued += 1
        self._position += 1
        self._last_queued = self._position
        self._positions.append(self._position)
        if self._queued + _ROOM > self._max_queue:
            self._has_room.clear()
        self._queue.append(prepared)
        if len(self._queue) >= self._wake_len:
            self._arrived.set()
        self.stats.accepted += 1
        return True

    def mark(self) -> int:
        """The position after every reading queued so far."""
        return self._position

    async def room(self) -> None:
        """Wait while the queue is nearly full (a producer that can wait, like MQTT QoS 1)."""
        await self._has_room.wait()

    def full(self) -> bool:
        """True while :meth:`room` would wait."""
        return not self._has_room.is_set()

    def closes_at(self) -> float | None:
        """The loop time at which the batch being gathered closes at the latest (sooner when
        it fills, or at a flush), while readings come as a trickle: None while no batch is
        open (a reading queued now opens one), and while the last batch closed on its size
        (a burst: what is read sooner is committed sooner)."""
        return self._closes_at if self._trickle else None

    def outcome(self, start: int, end: int) -> bool | None:
        """Whether the readings queued between marks ``start`` and ``end`` are committed:
        True; False if one of them was refused or lost (then its message must not be
        acknowledged: the broker delivers it again); None while they are not all finished."""
        # Nothing to wait for past the last queued reading (the rest were refused).
        if min(end, self._last_queued) > self._finished:
            return None
        return self._intact(start, end)

    async def progress(self) -> None:
        """Wait until more queued readings are finished (committed or lost)."""
        await self._progressed.wait()

    def _refused(self) -> None:
        self._position += 1
        failed = self._failed
        if failed and failed[-1][1] == self._position - 1:
            failed[-1] = (failed[-1][0], self._position)  # a run of refusals is one range
        else:
            failed.append((self._position - 1, self._position))

    def _intact(self, start: int, end: int) -> bool:
        return not any(a < end and b > start for a, b in self._failed)

    def _finish(self, count: int, committed: bool) -> None:
        """The next ``count`` queued readings are done: wake whoever waits for progress."""
        if count == 0:
            return
        for _ in range(count - 1):
            self._positions.popleft()
        last = self._positions.popleft()
        if not committed:
            self._failed.append((self._finished, last))
        self._finished = last
        self._queued -= count
        if self._queued + _ROOM <= self._max_queue:
            self._has_room.set()
        progressed, self._progressed = self._progressed, asyncio.Event()
        progressed.set()
        # Failures are rare; the recent ones are all a message being handled can span.
        del self._failed[:-_FAILURES_KEPT]

    def submit_many(self, readings: Iterable[IncomingReading]) -> int:
        """Submit several readings; returns how many were queued."""
        return sum(self.submit(reading) for reading in readings)

    def _reject(self, reason: str, reading: IncomingReading, value: object) -> None:
        self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + 1
        self._problems.warning(
            f"{reason}:{reading.device_id}:{reading.metric}",
            "device %s: %s reading rejected (%s): %r",
            reading.device_id,
            reading.metric,
            reason.replace("_", " "),
            value,
        )

    def _finite(self, value: float, reading: IncomingReading) -> bool:
        try:
            if math.isfinite(value):
                return True
        except TypeError:  # a caller's bug, but one bad reading must not break ingest
            self._reject("not_a_number", reading, value)
            return False
        self._reject("not_a_number" if math.isnan(value) else "infinite", reading, value)
        return False

    def _prepare(self, reading: IncomingReading) -> NewReading | None:
        raw = reading.value
        if not self._finite(raw, reading):
            return None
        value = raw
        if self._calibration is not None:
            try:
                calibration = self._calibration(reading.device_id, reading.metric)
            except Exception:
                # Storing an uncalibrated value as if calibrated would be silent garbage.
                self._reject("calibration_error", reading, raw)
                self._problems.exception("calibration", "calibration provider failed")
                return None
            if calibration is not None:
                value = apply(calibration, raw)
                if not self._finite(value, reading):
                    return None
        if reading.valid_range is not None:
            low, high = reading.valid_range
            if not low <= value <= high:
                self._reject("out_of_range", reading, value)
                return None
        received, device = reading.received_ts, reading.device_ts
        clock = self._clock
        if clock is not None:
            received += clock.receive_correction_ms()
        set_aside = None
        # While the agent's own clock is neither set nor corrected by the cloud's, a device's
        # time is the better one, however far from it (issue 30).
        trusted = clock is None or clock.trusted
        if trusted and device is not None and device > received + self._max_ahead_ms:
            self.stats.device_clock_ahead += 1
            self._problems.warning(
                f"ahead:{reading.device_id}",
                "device %s: clock %d ms ahead of the agent; using the receive time",
                reading.device_id,
                device - received,
            )
            set_aside, device = device, None
        ts = received if device is None else device
        if ts <= 0:
            self._reject("bad_timestamp", reading, ts)
            return None
        if ts < received - self._max_age_ms:
            self._reject("too_old", reading, ts)
            return None
        skewed = device is not None and abs(device - received) > self._skew_ms
        if device is None and clock is not None:
            clock.note_receipt(reading.device_id, reading.metric, ts)
        return NewReading(
            device_id=reading.device_id,
            metric=reading.metric,
            unit=reading.unit,
            ts=ts,
            value=value,
            raw=None if value == raw else raw,
            received_ts=received if skewed else None,
            on_receipt=device is None,
            device_ts=set_aside,
        )

    @property
    def queued(self) -> int:
        """Readings waiting for a commit."""
        return self._queued

    @property
    def running(self) -> bool:
        """Whether the commit task is alive (the systemd watchdog stops pinging when not)."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the commit task."""
        if self._task is None:
            self._closed = False
            self._task = asyncio.create_task(self._run(), name="reading-writer")

    async def stop(self) -> None:
        """Refuse new readings, commit everything queued, and end the commit task."""
        self._closed = True
        task, self._task = self._task, None
        if task is None:
            return
        self._mark(_Marker(asyncio.get_running_loop().create_future(), stop=True))
        try:
            done, _ = await asyncio.wait({task}, timeout=self._stop_timeout)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            log.error("reading writer did not finish within %.1f s; cancelling", self._stop_timeout)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.stats.lost += self._queued
            self._finish(self._queued, committed=False)

    async def flush(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Commit everything submitted so far now, and wait until it is committed."""
        if self._task is None:
            raise RuntimeError("reading writer is not running")
        marker = _Marker(asyncio.get_running_loop().create_future())
        self._mark(marker)
        async with asyncio.timeout(timeout):
            await marker.done

    def _mark(self, marker: _Marker) -> None:
        self._queue.append(marker)
        self._markers += 1
        self._arrived.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        # Far enough back that the first batch is not held by the fsync-rate bound.
        last_commit = loop.time() - self._min_interval
        while True:
            batch, markers = await self._collect(last_commit)
            committed = False
            try:
                if batch:
                    last_commit = loop.time()
                    committed = await self._commit(batch)
            except Exception:  # _commit handles store errors; this is a bug guard
                self.stats.lost += len(batch)
                log.exception("reading batch of %d lost", len(batch))
                await asyncio.sleep(self._retry_delay)
            finally:
                self._finish(len(batch), committed)
                for marker in markers:
                    if not marker.done.done():
                        marker.done.set_result(None)
            if any(marker.stop for marker in markers):
                return

    async def _collect(self, last_commit: float) -> tuple[list[NewReading], list[_Marker]]:
        """Wait for a reading, then take everything queued (group commit).

        The batch closes once the queue is empty, it holds ``commit_rows`` readings and
        ``min_commit_interval`` has passed since the previous commit began, or
        ``batch_interval`` after its first reading at the latest,
        or when it is full, or at a flush or stop marker.

        While it waits, it is woken when what is queued could close it (``commit_rows``
        readings, a full batch, a marker), not by each reading: at a farm's pace a batch
        gathers a few dozen messages' readings.
        """
        loop = asyncio.get_running_loop()
        batch: list[NewReading] = []
        markers: list[_Marker] = []
        item = await self._next()
        latest = loop.time() + self._wait()
        due = min(last_commit + self._min_interval, latest)
        try:
            while True:
                if isinstance(item, _Marker):
                    self._markers -= 1
                    markers.append(item)
                    return batch, markers  # a flush or stop commits what came before it, now
                batch.append(item)
                # Every limit is at least the busy one: below it, nothing to ask.
                if len(batch) >= self._busy_batch and len(batch) >= self._batch_limit():
                    self._trickle = False
                    return batch, markers
                if self._queue:
                    item = self._queue.popleft()
                    continue
                # Fewer than commit_rows: wait for more, up to batch_interval.
                enough = len(batch) >= self._commit_rows
                closes = due if enough else latest
                remaining = closes - loop.time()
                if remaining <= 0:
                    self._trickle = not enough
                    return batch, markers
                self._closes_at = closes
                limit = self._batch_limit()
                full = limit if enough else min(self._commit_rows, limit)
                try:
                    async with asyncio.timeout(remaining):
                        item = await self._next(full - len(batch))
                except TimeoutError:
                    self._trickle = not enough
                    # What came meanwhile joins the batch, as if each had woken it.
                    while self._queue:
                        item = self._queue.popleft()
                        if isinstance(item, _Marker):
                            self._markers -= 1
                            markers.append(item)
                            break
                        batch.append(item)
                        if len(batch) >= self._busy_batch and len(batch) >= self._batch_limit():
                            break
                    return batch, markers
        finally:
            self._closes_at = None

    async def _next(self, wanted: int = 1) -> NewReading | _Marker:
        """The next queued item, once ``wanted`` items (at least one) or a marker are
        queued."""
        wanted = max(wanted, 1)
        self._wake_len = wanted
        try:
            while len(self._queue) < wanted and not self._markers:
                self._arrived.clear()
                await self._arrived.wait()
        finally:
            self._wake_len = 1
        return self._queue.popleft()

    def _wait(self) -> float:
        """How long a batch may wait for more readings."""
        watched = self._watched
        if watched is None or watched():
            return self._interval
        return self._unwatched_interval

    def _batch_limit(self) -> int:
        busy, quiet = self._busy, self._quiet
        if busy is not None and busy():
            return self._busy_batch
        if quiet is not None and quiet():
            return self._quiet_batch
        return self._max_batch

    async def _commit(self, batch: list[NewReading]) -> bool:
        """Commit with retries; False if the batch was lost.

        A refusal for lack of space is no attempt: it is retried until the batch commits."""
        attempt = refusals = 0
        while True:
            try:
                began = time.perf_counter()
                outcome = await self._store.write(batch)
                self.stats.commit_times.observe(time.perf_counter() - began)
            except Exception as err:
                self.stats.commit_failures += 1
                if out_of_space(err):
                    await self._wait_for_room(refusals, len(batch))
                    refusals += 1
                    continue
                attempt += 1
                if attempt >= self._attempts:
                    self.stats.lost += len(batch)
                    log.exception("reading batch of %d lost after %d attempts", len(batch), attempt)
                    return False
                self._problems.exception("commit", "reading batch commit failed; retrying")
                await asyncio.sleep(
                    Backoff(self._retry_delay, math.inf, jitter=False).delay(attempt - 1)
                )
                continue
            self._room_back(refusals, len(batch))
            self._committed(outcome)
            return True

    async def _wait_for_room(self, refusals: int, size: int) -> None:
        """A commit was refused for lack of space: wait before trying the same batch again."""
        self.stats.space_refusals += 1
        if self.stalled_since is None:
            self.stalled_since = time.time()
            log.error(
                "reading batch of %d refused: the storage is full; retrying until there is room"
                " (QoS 1 messages stay unacknowledged in the broker meanwhile)",
                size,
            )
        await asyncio.sleep(SPACE_RETRY.delay(refusals))

    def _room_back(self, refusals: int, size: int) -> None:
        if refusals and self.stalled_since is not None:
            log.warning(
                "reading batch of %d committed after %d refusals for lack of space (%.0f s)",
                size,
                refusals,
                time.time() - self.stalled_since,
            )
        self.stalled_since = None

    def _committed(self, outcome: WriteOutcome) -> None:
        self.stats.commits += 1
        self.stats.committed += len(outcome.inserted)
        self.stats.duplicates += outcome.duplicates
        self.stats.unknown_device += outcome.unknown_device
        if outcome.unknown_device:
            self._problems.warning(
                "unknown-device",
                "%d readings of deleted or unknown devices dropped",
                outcome.unknown_device,
            )
        self.listeners.deliver(
            CommittedReading(r.device_id, r.metric, r.unit, r.ts, r.value, r.raw, r.received_ts)
            for r in outcome.inserted
        )
