"""Readings: series of (device, metric), raw values and their 1-minute and 1-hour rollups.

Timestamps are integer unix milliseconds. Where a reading lives (migrations 0002, 0015, 0090):

- ``readings_stage``: where a batch is committed when the store stages (the running agent). Rows
  are appended in arrival order, so a commit rewrites the stage's last page, not a page of
  every series: on an SD card, bytes written are what wears it out. A row's ``seq`` is its
  number in the sync outbox's sequence (migration 0116): the staged row is what waits for the
  cloud (``outbox_staged``, agent/sync/outbox.py), with no copy written beside it.
- ``readings`` (clustered on ``(series_id, ts)``), ``readings_1m`` and ``readings_1h``: the
  series-ordered store. :meth:`ReadingStore.fold` moves staged readings there in large batches,
  series by series, each chunk its own short transaction; the triggers of ``readings`` keep the
  rollups. ``readings_fold`` records the fold under way, so a crash resumes it and a staged row
  is never counted twice. When the fold empties the stage, the readings the cloud has not
  acknowledged yet (during an outage, all of them) are queued in ``outbox_readings``, under
  their numbers.
- The views ``readings_all``, ``readings_1m_all`` and ``readings_1h_all`` show every reading
  once, folded or staged (a staged reading is a rollup row of its own, count 1): every read
  goes through them, so a query right after a commit returns the reading.

A store that does not stage (``staged=False``) writes batches into ``readings`` directly.

A series holds one reading per millisecond. A reading stamped with its device's time is stored
once per (series, ts): a re-delivered message is a no-op. A reading stamped on receipt is a new
reading every time (many can arrive in one millisecond): it takes the first free millisecond at
or after its receive time, after the series' previous receive stamp; only when it carries a
device time that was set aside (a clock far off) is a reading with the same device time and
value a re-delivery, stored once. Ranges are half-open,
``start <= ts < end``; at a bucketed resolution every bucket overlapping the range is returned
whole, stamped with its start.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from agent.store.db import Database
from agent.store.devices import stamp_last_readings
from agent.store.outbox_sequence import OutboxSequence
from protocol.records import record
from protocol.timefmt import from_ms, iso, now_iso

__all__ = [
    "HOUR_MS",
    "MINUTE_MS",
    "NewReading",
    "Point",
    "ReadingStore",
    "Resolution",
    "SeriesInfo",
    "StampShift",
    "WriteOutcome",
    "floor_to",
]

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
_TS_MAX = 2**63 - 1
# Variables per statement stay far below SQLite's limit (32766 since 3.32, 999 before).
_CHUNK = 400
# Chunks of one fold at most (each one scans the stage).
_MAX_CHUNKS = 64
# Rows per multi-row INSERT: 6 variables each.
_INSERT_ROWS = 500
# Readings staged while a fold ran, between emptying the stage and putting them back.
_KEEP_STAGED = "CREATE TEMP TABLE IF NOT EXISTS stage_kept AS SELECT * FROM readings_stage WHERE 0"
# While readings are staged, devices' last_reading is stamped at most this often (and at each
# fold): a stamp per commit rewrote a page of the devices table per device per commit, a stamp
# per fold (30 min) left the API's last_reading that far behind.
LAST_READING_EVERY_S = 60.0


class Resolution(StrEnum):
    """Where points come from: raw readings or a rollup table."""

    RAW = "raw"
    MINUTE = "1m"
    HOUR = "1h"

    @property
    def table(self) -> str:
        """The table holding this resolution."""
        return _TABLES[self]

    @property
    def view(self) -> str:
        """The view of this resolution that includes staged readings (what reads use)."""
        return _VIEWS[self]

    @property
    def step_ms(self) -> int:
        """Bucket width of a rollup (0 for raw)."""
        return _STEPS[self]


_TABLES = {
    Resolution.RAW: "readings",
    Resolution.MINUTE: "readings_1m",
    Resolution.HOUR: "readings_1h",
}
_VIEWS = {
    Resolution.RAW: "readings_all",
    Resolution.MINUTE: "readings_1m_all",
    Resolution.HOUR: "readings_1h_all",
}
_STEPS = {Resolution.RAW: 0, Resolution.MINUTE: MINUTE_MS, Resolution.HOUR: HOUR_MS}


@record
class NewReading:
    """A validated, calibrated reading ready to store."""

    device_id: str
    metric: str
    unit: str
    ts: int
    value: float
    raw: float | None = None
    received_ts: int | None = None
    on_receipt: bool = False
    """``ts`` is the receive time: moved to a free millisecond of the series if taken."""
    device_ts: int | None = None
    """The device's own time when it was set aside for the receive time."""


@dataclass(frozen=True, slots=True)
class StampShift:
    """Readings of (device, metric) stamped in ``[first_ts, last_ts]`` belong ``delta_ms``
    later (earlier when negative)."""

    device_id: str
    metric: str
    first_ts: int
    last_ts: int
    delta_ms: int


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What a batch write did: the readings it inserted, and what it skipped."""

    inserted: tuple[NewReading, ...]
    duplicates: int
    unknown_device: int


@dataclass(frozen=True, slots=True)
class Point:
    """One point of a series; a raw reading has min = max = mean and count 1."""

    ts: int
    mean: float
    min: float
    max: float
    count: int


@dataclass(frozen=True, slots=True)
class SeriesInfo:
    """A (device, metric) series."""

    id: int
    device_id: str
    metric: str
    unit: str


@dataclass(frozen=True, slots=True)
class _Cached:
    id: int
    unit: str


def floor_to(ts: int, step: int) -> int:
    """Start of the ``step``-wide bucket holding ``ts`` (buckets aligned to the unix epoch)."""
    return ts - ts % step if step else ts


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _batched(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


class ReadingStore:
    """Writes batches of readings and reads them back at any resolution."""

    def __init__(
        self,
        db: Database,
        *,
        staged: bool = False,
        fold_chunk: int = 1000,
        last_reading_every_s: float = LAST_READING_EVERY_S,
    ) -> None:
        self._db = db
        self._series: dict[tuple[str, str], _Cached] = {}
        # Per series id, the last run of receive stamps given: [first, last] all taken.
        self._stamps: dict[int, tuple[int, int]] = {}
        self._staged = staged
        # Per series id, the newest ts ever staged (loaded at the first write): a reading newer
        # than that cannot collide with a staged one, and the stage (no index: appends only)
        # is searched only for the others, re-deliveries and late readings.
        self._staged_max: dict[int, int] | None = None
        self._fold_chunk = fold_chunk
        # Staged readings' newest time per device, not yet stamped on the devices table.
        self._unstamped: dict[str, int] = {}
        self._stamped_at = time.monotonic()
        self._last_reading_every_s = last_reading_every_s

    @property
    def staged(self) -> bool:
        """Whether batches are committed to the stage (and folded later)."""
        return self._staged

    async def write(self, readings: Sequence[NewReading]) -> WriteOutcome:
        """Store a batch in one transaction; duplicates of stored (series, ts) are skipped.

        Readings of devices that no longer exist are dropped and counted, so a device deleted
        while its readings were queued cannot fail the batch. The whole batch runs as one call
        on the database's thread: the write lock is held for the batch's own work, never while
        this task waits for a busy event loop to schedule its next statement.
        """
        if not readings:
            return WriteOutcome((), 0, 0)
        staged_max = None
        if self._staged:
            if self._staged_max is None:
                rows = await self._db.fetch_all(
                    "SELECT series_id, max(ts) FROM readings_stage GROUP BY series_id"
                )
                self._staged_max = {int(sid): int(ts) for sid, ts in rows}
            staged_max = self._staged_max
        snapshot = None if staged_max is None else dict(staged_max)
        batch = _Batch(
            readings, dict(self._series), dict(self._stamps), snapshot, self._db.sequence
        )
        due = (
            staged_max is not None
            and time.monotonic() - self._stamped_at >= self._last_reading_every_s
        )
        if due:
            batch.last_readings = dict(self._unstamped)
        outcome = await self._db.write(
            batch.run, hot=True, bulk=True, sequenced=staged_max is not None
        )
        if staged_max is not None:
            for sid, ts in batch.staged_newest.items():
                if ts > staged_max.get(sid, -1):
                    staged_max[sid] = ts
            if due:
                self._unstamped = {}
                self._stamped_at = time.monotonic()
            unstamped = self._unstamped
            for reading in outcome.inserted:
                if reading.ts > unstamped.get(reading.device_id, -1):
                    unstamped[reading.device_id] = reading.ts
        # Only after COMMIT: ids created by a rolled-back transaction do not exist.
        for key in batch.stale:
            self._series.pop(key, None)
        self._series.update(batch.created)
        self._stamps.update(batch.runs)
        return outcome

    async def stage_size(self) -> int:
        """Readings in the stage (folded or not): what the next fold will move."""
        return int(await self._db.fetch_value("SELECT count(*) FROM readings_stage"))

    async def fold(self) -> int:
        """Move the staged readings into ``readings`` and its rollups; the readings moved.

        Series by series in chunks of about ``fold_chunk`` readings, each its own short
        transaction (a command's write waits for one chunk at most), in series order (each
        series' last pages are rewritten once per fold, not once per commit). A fold cut short
        (a crash) is resumed by the next one from ``readings_fold``, which then folds what was
        staged since.
        """
        folded = 0
        while True:
            row = await self._db.fetch_one("SELECT upto, next_series FROM readings_fold")
            upto, next_series = (int(row[0]), int(row[1])) if row is not None else (0, 0)
            if upto:
                folded += await self._fold_upto(upto, next_series)
                continue  # a fold cut short: then the readings staged after it
            top = await self._db.fetch_value("SELECT max(seq) FROM readings_stage")
            if top is None:
                return folded
            return folded + await self._fold_upto(int(top), 0)

    async def _fold_upto(self, upto: int, next_series: int) -> int:
        """Fold the staged readings up to ``upto``, from series ``next_series`` on."""
        # One scan, no sort (a GROUP BY over the stage sorted it in memory: megabytes of RSS):
        # series ids are dense, so equal id ranges hold about equal shares of the readings.
        row = await self._db.fetch_one(
            "SELECT min(series_id), max(series_id), count(*) FROM readings_stage"
            " WHERE seq <= ? AND series_id >= ?",
            (upto, next_series),
        )
        folded = 0
        spans = (
            []
            if row is None or row[0] is None
            else _spans(int(row[0]), int(row[1]), int(row[2]), self._fold_chunk)
        )
        for low, high in spans:
            folded += await self._db.write(
                functools.partial(_fold_chunk, upto, low, high), hot=True, bulk=True
            )
        await self._db.write(functools.partial(_end_fold, upto), hot=True, bulk=True)
        return folded

    async def find_series(self, device_id: str, metric: str) -> SeriesInfo | None:
        """The series of a device's metric, if it has ever reported one."""
        row = await self._db.fetch_one(
            "SELECT id, device_id, metric, unit FROM series WHERE device_id = ? AND metric = ?",
            (device_id, metric),
        )
        return None if row is None else SeriesInfo(*row)

    async def series_of(self, device_id: str) -> list[SeriesInfo]:
        """Every series a device has reported, by metric."""
        rows = await self._db.fetch_all(
            "SELECT id, device_id, metric, unit FROM series WHERE device_id = ? ORDER BY metric",
            (device_id,),
        )
        return [SeriesInfo(*row) for row in rows]

    async def device_farm(self, device_id: str) -> str | None:
        """The farm a device belongs to, or None if there is no such device."""
        value = await self._db.fetch_value("SELECT farm_id FROM devices WHERE id = ?", (device_id,))
        return None if value is None else str(value)

    async def oldest(self, series_id: int, resolution: Resolution) -> int | None:
        """Timestamp of the oldest row kept at a resolution (None if it holds none)."""
        value = await self._db.fetch_value(
            f"SELECT min(ts) FROM {resolution.view} WHERE series_id = ?", (series_id,)
        )
        return None if value is None else int(value)

    async def count_upto(
        self, series_id: int, resolution: Resolution, start: int, end: int, limit: int
    ) -> int:
        """Rows in the range at a resolution, counting no further than ``limit``."""
        value = await self._db.fetch_value(
            f"SELECT count(*) FROM (SELECT DISTINCT ts FROM {resolution.view}"
            " WHERE series_id = ? AND ts >= ? AND ts < ? LIMIT ?)",
            (series_id, floor_to(start, resolution.step_ms), end, limit),
        )
        return int(value)

    async def points(
        self, series_id: int, resolution: Resolution, start: int, end: int, bucket_ms: int = 0
    ) -> list[Point]:
        """Points of a series in a range, rebucketed to ``bucket_ms`` when it is given.

        ``bucket_ms`` must be a multiple of the resolution's own step.
        """
        if bucket_ms and bucket_ms % max(resolution.step_ms, 1):
            raise ValueError(f"bucket {bucket_ms} ms is not a multiple of {resolution}")
        table = resolution.view
        if resolution is Resolution.RAW and not bucket_ms:
            rows = await self._db.fetch_all(
                "SELECT ts, value FROM readings_all WHERE series_id = ? AND ts >= ? AND ts < ?"
                " ORDER BY ts",
                (series_id, start, end),
            )
            return [Point(ts, value, value, value, 1) for ts, value in rows]
        if not bucket_ms:
            low = floor_to(start, resolution.step_ms)
            # A bucket may have a folded row and staged readings: one point of them all.
            rows = await self._db.fetch_all(
                f"SELECT ts, min(vmin), max(vmax), sum(vsum), sum(n) FROM {table}"
                " WHERE series_id = ? AND ts >= ? AND ts < ? GROUP BY ts ORDER BY ts",
                (series_id, low, end),
            )
        else:
            low, high = floor_to(start, bucket_ms), floor_to(end - 1, bucket_ms) + bucket_ms
            columns = (
                "min(value), max(value), sum(value), count(*)"
                if resolution is Resolution.RAW
                else "min(vmin), max(vmax), sum(vsum), sum(n)"
            )
            rows = await self._db.fetch_all(
                f"SELECT ts - ts % ? AS bucket, {columns} FROM {table}"
                " WHERE series_id = ? AND ts >= ? AND ts < ? GROUP BY bucket ORDER BY bucket",
                (bucket_ms, series_id, low, high),
            )
        return [Point(ts, total / n, lo, hi, n) for ts, lo, hi, total, n in rows]

    async def delete_chunk(
        self,
        resolution: Resolution,
        before: int,
        limit: int,
        device_id: str | None = None,
    ) -> int:
        """Delete at most ``limit`` rows older than ``before`` in one short transaction.

        Works series by series along the primary key, so each chunk is a few index range
        deletes and writers wait for one chunk at most. Returns the number of rows deleted.
        """
        table = resolution.table
        if device_id is None:
            series_ids = await self._db.fetch_all("SELECT id FROM series ORDER BY id")
        else:
            series_ids = await self._db.fetch_all(
                "SELECT id FROM series WHERE device_id = ?", (device_id,)
            )
        bounded = min(before, _TS_MAX)
        ids = [series_id for (series_id,) in series_ids]
        # One hop to the writer's thread for the whole chunk: a farm has thousands of series,
        # and a statement each from the event loop was a round trip between the threads each.
        return await self._db.write(
            functools.partial(_delete_chunk, table, ids, bounded, limit), hot=True, bulk=True
        )

    async def shift_receive_stamps(self, shifts: Sequence[StampShift]) -> int:
        """Move readings stamped on receipt while the agent's clock was wrong to where they
        belong, once the jump is known (issue 30); the number of readings moved.

        For each shift, the readings of its series in ``[first_ts, last_ts]`` whose receive
        time was not kept beside them (``received_ts IS NULL``: stamped on receipt, or by a
        device within the skew) move by ``delta_ms``, in one transaction with:

        - the 1-minute and 1-hour rollups of the buckets they leave and enter, recomputed from
          the raw rows (which retention keeps far longer than a clock is wrong);
        - their rows queued in the sync outbox (``outbox_readings``, where the fold that comes
          first queues the staged readings the cloud has not acknowledged), in flight or not:
          the cloud takes a reading once by its sequence number, so a reading it already holds
          under the old time is not doubled by the resend. A reading the cloud acknowledged,
          or one folded into an outbox rollup, stays at its old time.

        A reading whose new millisecond is taken stays where it was. This is the one place that
        knows how readings are laid out for this move: a change of the readings' storage
        changes this function and nothing else. Staged readings are folded first (a jump is
        rare; one fold costs less than teaching the move the stage's layout).
        """
        if not shifts:
            return 0
        if self._staged:
            await self.fold()
        moved = await self._db.write(lambda conn: _shift(conn, shifts))
        self._stamps.clear()  # the runs of receive stamps given no longer hold
        self._staged_max = None  # reloaded from the stage at the next write
        return moved


class _Batch:
    """One batch write, run on the database's thread (:meth:`Database.write`) with snapshots
    of the store's caches; what the caches learn is applied after the commit."""

    def __init__(
        self,
        readings: Sequence[NewReading],
        series: dict[tuple[str, str], _Cached],
        stamps: dict[int, tuple[int, int]],
        staged_max: dict[int, int] | None = None,
        sequence: OutboxSequence | None = None,
    ) -> None:
        self.readings = readings
        self.series = series
        self.stamps = stamps
        self.staged_max = staged_max
        """None: write into ``readings``; else stage, knowing each series' newest staged ts."""
        self.sequence = sequence
        """Where a staged batch takes its sync outbox numbers."""
        self.staged_newest: dict[int, int] = {}
        self.created: dict[tuple[str, str], _Cached] = {}
        self.stale: list[tuple[str, str]] = []
        self.runs: dict[int, tuple[int, int]] = {}
        self.last_readings: dict[str, int] = {}
        """Staged readings' newest times per device to stamp on the devices table now."""

    def run(self, conn: sqlite3.Connection) -> WriteOutcome:
        """Insert the batch (inside the caller's transaction)."""
        readings = self.readings
        wanted = {(r.device_id, r.metric): r.unit for r in readings}
        ids = self._series_ids(conn, wanted)
        unknown = duplicates = 0
        keyed: dict[tuple[int, int], NewReading] = {}
        received: list[tuple[int, NewReading]] = []
        for reading in readings:
            series_id = ids.get((reading.device_id, reading.metric))
            if series_id is None:
                unknown += 1
            elif reading.on_receipt:
                received.append((series_id, reading))
            elif (series_id, reading.ts) in keyed:
                duplicates += 1
            else:
                keyed[series_id, reading.ts] = reading
        for key in self._existing(conn, keyed):
            del keyed[key]
            duplicates += 1
        for key in self._existing_staged(conn, keyed):
            del keyed[key]
            duplicates += 1
        fresh = self._not_redelivered(conn, received)
        duplicates += len(received) - len(fresh)
        stamped, self.runs = self._stamp(conn, fresh, keyed.keys())
        keyed.update(stamped)
        # Many rows per statement: each statement is one hop without the GIL, and a thread
        # that needs the GIL back once per row waits out the busy event loop every time.
        if self.staged_max is None:
            for chunk in _batched(keyed.items(), _INSERT_ROWS):
                _rows(
                    conn,
                    "INSERT OR IGNORE INTO readings"
                    " (series_id, ts, value, raw, received_ts, device_ts) VALUES "
                    + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(chunk)),
                    [
                        part
                        for (sid, ts), r in chunk
                        for part in (sid, ts, r.value, r.raw, r.received_ts, r.device_ts)
                    ],
                )
        else:
            self._stage(conn, keyed)
            # Devices' last_reading is stamped by the fold: stamping it here rewrote a page
            # of the devices table per device per commit.
            newest_staged = self.staged_newest
            for sid, ts in keyed:
                if ts > newest_staged.get(sid, -1):
                    newest_staged[sid] = ts
            if self.last_readings:
                stamp_last_readings(
                    conn, {d: iso(from_ms(ts)) for d, ts in self.last_readings.items()}
                )
            return WriteOutcome(tuple(keyed.values()), duplicates, unknown)
        # The devices' last_reading in the same transaction: a write of its own after each
        # batch cost a second commit and a second hop to this thread per batch.
        newest: dict[str, int] = {}
        for reading in keyed.values():
            if reading.ts > newest.get(reading.device_id, -1):
                newest[reading.device_id] = reading.ts
        if newest:
            stamp_last_readings(conn, {d: iso(from_ms(ts)) for d, ts in newest.items()})
        return WriteOutcome(tuple(keyed.values()), duplicates, unknown)

    def _stage(self, conn: sqlite3.Connection, keyed: Mapping[tuple[int, int], NewReading]) -> None:
        """Append the readings to the stage, each numbered from the outbox's sequence in
        memory: a staged reading's ``seq`` is its outbox number, so the stage row is what waits
        for the cloud (no copy, and no page of a counter rewritten per commit: 0092, 0116)."""
        if not keyed:
            return
        assert self.sequence is not None, "a staged batch numbers its readings"
        seq = self.sequence.reserve(conn, len(keyed))
        for chunk in _batched(keyed.items(), _INSERT_ROWS):
            _rows(
                conn,
                "INSERT INTO readings_stage (seq, series_id, ts, value, raw, received_ts,"
                " device_ts) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(chunk)),
                [
                    part
                    for index, ((sid, ts), r) in enumerate(chunk, start=seq + 1)
                    for part in (index, sid, ts, r.value, r.raw, r.received_ts, r.device_ts)
                ],
            )
            seq += len(chunk)

    def _not_redelivered(
        self, conn: sqlite3.Connection, received: list[tuple[int, NewReading]]
    ) -> list[tuple[int, NewReading]]:
        """Receive-stamped readings minus re-deliveries (same device time and value)."""
        seen: set[tuple[int, int, float]] = set()
        timed = [(sid, r.device_ts) for sid, r in received if r.device_ts is not None]
        for chunk in _batched(timed, _CHUNK):
            values = ", ".join("(?, ?)" for _ in chunk)
            rows = _rows(
                conn,
                f"SELECT r.series_id, r.device_ts, r.value FROM (VALUES {values}) AS k"
                " CROSS JOIN readings r ON r.series_id = k.column1 AND r.device_ts = k.column2",
                [part for key in chunk for part in key],
            )
            seen.update((row[0], row[1], row[2]) for row in rows)
        if timed and self.staged_max is not None:
            for chunk in _batched({sid for sid, _ in timed}, _CHUNK):
                rows = _rows(
                    conn,
                    "SELECT series_id, device_ts, value FROM readings_staged"
                    f" WHERE device_ts IS NOT NULL AND series_id IN ({_placeholders(len(chunk))})",
                    chunk,
                )
                seen.update((row[0], row[1], row[2]) for row in rows)
        fresh = []
        for sid, reading in received:
            if reading.device_ts is not None:
                key = (sid, reading.device_ts, reading.value)
                if key in seen:
                    continue
                seen.add(key)
            fresh.append((sid, reading))
        return fresh

    def _stamp(
        self,
        conn: sqlite3.Connection,
        received: list[tuple[int, NewReading]],
        taken: Iterable[tuple[int, int]],
    ) -> tuple[dict[tuple[int, int], NewReading], dict[int, tuple[int, int]]]:
        """Give each receive-stamped reading the first free millisecond at or after its own.

        Returns the readings by their new keys, and the runs to remember after the commit.
        """
        used = set(taken)
        # Per series, a run [first, last] of milliseconds known to be taken: a burst received in
        # one millisecond walks it once, not once per reading.
        runs = dict(self.stamps)
        checked: dict[int, int] = {}  # per series, stored readings are known up to this ts
        stamped: dict[tuple[int, int], NewReading] = {}
        pending = received
        while pending:
            self._load_taken(conn, pending, checked, used)
            unchecked: list[tuple[int, NewReading]] = []
            for sid, reading in pending:
                ts = reading.ts
                first, last = runs.get(sid, (ts, ts - 1))
                if first <= ts <= last:
                    ts = last + 1
                else:
                    first = ts
                while (sid, ts) in used:
                    ts += 1
                if ts > checked[sid]:
                    unchecked.append((sid, reading))  # beyond what was loaded: load more
                    continue
                used.add((sid, ts))
                runs[sid] = (first, ts)
                stamped[sid, ts] = replace(reading, ts=ts)
            pending = unchecked
        return stamped, runs

    def _load_taken(
        self,
        conn: sqlite3.Connection,
        pending: list[tuple[int, NewReading]],
        checked: dict[int, int],
        used: set[tuple[int, int]],
    ) -> None:
        """Add the stored milliseconds the pending readings may land on to ``used``."""
        spans: dict[int, tuple[int, int]] = {}
        for sid, reading in pending:
            low = max(reading.ts, checked.get(sid, reading.ts - 1) + 1)
            known = spans.get(sid)
            spans[sid] = (low, low) if known is None else (min(known[0], low), known[1])
        counts: dict[int, int] = {}
        for sid, _ in pending:
            counts[sid] = counts.get(sid, 0) + 1
        ranges = [
            (sid, low, max(low, self.stamps.get(sid, (0, low))[1]) + 2 * counts[sid])
            for sid, (low, _) in spans.items()
        ]
        for chunk in _batched(ranges, _CHUNK):
            values = ", ".join("(?, ?, ?)" for _ in chunk)
            rows = _rows(
                conn,
                f"SELECT r.series_id, r.ts FROM (VALUES {values}) AS k CROSS JOIN readings r"
                " ON r.series_id = k.column1 AND r.ts >= k.column2 AND r.ts <= k.column3",
                [part for key in chunk for part in key],
            )
            used.update((row[0], row[1]) for row in rows)
        used.update(self._staged_in(conn, ranges))
        for sid, _, high in ranges:
            checked[sid] = high

    def _staged_in(
        self, conn: sqlite3.Connection, ranges: Iterable[tuple[int, int, int]]
    ) -> list[tuple[int, int]]:
        """Staged (series, ts) inside the ``(series, low, high)`` ranges that may hold any: a
        scan of the stage, done only for ranges at or below a series' newest staged ts."""
        known = self.staged_max
        if known is None:
            return []
        wanted: dict[int, tuple[int, int]] = {}
        for sid, low, high in ranges:
            if low <= known.get(sid, -1):
                span = wanted.get(sid)
                wanted[sid] = (
                    (low, high) if span is None else (min(span[0], low), max(span[1], high))
                )
        found: list[tuple[int, int]] = []
        for chunk in _batched(wanted, _CHUNK):
            low = min(wanted[sid][0] for sid in chunk)
            rows = _rows(
                conn,
                "SELECT series_id, ts FROM readings_staged"
                f" WHERE ts >= ? AND series_id IN ({_placeholders(len(chunk))})",
                [low, *chunk],
            )
            found.extend((sid, ts) for sid, ts in rows if wanted[sid][0] <= ts <= wanted[sid][1])
        return found

    def _existing_staged(
        self, conn: sqlite3.Connection, keys: Iterable[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """The keys already staged (the stage is searched only for keys at or below their
        series' newest staged ts)."""
        known = self.staged_max
        if known is None:
            return []
        ranges = [(sid, ts, ts) for sid, ts in keys]
        wanted = set(keys)
        return [key for key in self._staged_in(conn, ranges) if key in wanted]

    def _series_ids(
        self, conn: sqlite3.Connection, wanted: Mapping[tuple[str, str], str]
    ) -> dict[tuple[str, str], int]:
        ids: dict[tuple[str, str], int] = {}
        cached = {
            key: entry
            for key, entry in ((k, self.series.get(k)) for k in wanted)
            if entry is not None and entry.unit == wanted[key]
        }
        # A cached id may belong to a series deleted with its device since; check in this
        # transaction, so the check and the insert see the same database.
        alive: set[int] = set()
        for chunk in _batched({entry.id for entry in cached.values()}, _CHUNK):
            rows = _rows(
                conn, f"SELECT id FROM series WHERE id IN ({_placeholders(len(chunk))})", chunk
            )
            alive.update(row[0] for row in rows)
        for key, entry in cached.items():
            if entry.id in alive:
                ids[key] = entry.id
            else:
                self.stale.append(key)
        for (device_id, metric), unit in wanted.items():
            if (device_id, metric) in ids:
                continue
            rows = _rows(
                conn,
                """
                INSERT INTO series (device_id, metric, unit, created_at)
                SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM devices WHERE id = ?)
                ON CONFLICT (device_id, metric) DO UPDATE SET unit = excluded.unit
                RETURNING id
                """,
                (device_id, metric, unit, now_iso(), device_id),
            )
            row = next(iter(rows), None)
            if row is not None:
                ids[device_id, metric] = row[0]
                self.created[device_id, metric] = _Cached(row[0], unit)
        return ids

    def _existing(
        self, conn: sqlite3.Connection, keys: Iterable[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for chunk in _batched(keys, _CHUNK):
            values = ", ".join("(?, ?)" for _ in chunk)
            # A join on VALUES probes the primary key per pair; `(a, b) IN (VALUES ...)` scans.
            rows = _rows(
                conn,
                f"SELECT r.series_id, r.ts FROM (VALUES {values}) AS k"
                " CROSS JOIN readings r ON r.series_id = k.column1 AND r.ts = k.column2",
                [part for key in chunk for part in key],
            )
            found.extend((row[0], row[1]) for row in rows)
        return found


def _spans(first: int, last: int, rows: int, size: int) -> list[tuple[int, int]]:
    """Series id ranges ``[low, high)`` covering ``first..last``, as many as ``rows`` readings
    make chunks of about ``size``, and no more than ``_MAX_CHUNKS``: each chunk scans the
    stage (it has no index), so a large stage (a backlog) is folded in larger chunks."""
    count = max(1, min(last - first + 1, -(-rows // max(size, 1)), _MAX_CHUNKS))
    width = -(-(last - first + 1) // count)
    return [(low, min(low + width, last + 1)) for low in range(first, last + 1, width)]


def _fold_chunk(upto: int, low: int, high: int, conn: sqlite3.Connection) -> int:
    """Fold the staged readings (seq <= ``upto``) of series ``[low, high)``; how many moved."""
    conn.execute("UPDATE readings_fold SET upto = ?, next_series = ? WHERE id = 1", (upto, high))
    # The stage holds no duplicate of a stored reading (the batch checked): OR IGNORE is for a
    # chunk done again after a crash, whose rows are in `readings` already.
    cursor = conn.execute(
        "INSERT OR IGNORE INTO readings (series_id, ts, value, raw, received_ts, device_ts)"
        " SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings_stage"
        " WHERE seq <= ? AND series_id >= ? AND series_id < ? ORDER BY series_id, ts",
        (upto, low, high),
    )
    return max(cursor.rowcount, 0)


def _end_fold(upto: int, conn: sqlite3.Connection) -> None:
    """Stamp the devices' last reading, queue the folded rows the cloud has not acknowledged
    for it, drop the folded rows from the stage, end the fold."""
    rows = conn.execute(
        "SELECT s.device_id, max(st.ts) FROM readings_stage AS st"
        " JOIN series AS s ON s.id = st.series_id WHERE st.seq <= ? GROUP BY s.device_id",
        (upto,),
    ).fetchall()
    if rows:
        stamp_last_readings(conn, {device: iso(from_ms(ts)) for device, ts in rows})
    # The folded readings the cloud has not acknowledged yet (during an outage: all of them)
    # wait in `outbox_readings` from now on, under their own numbers: the stage is emptied,
    # and an outage's backlog is kept, compacted and moved by a clock jump there. Every row
    # there has a lower number (numbered before these were staged), so the outbox's totals
    # count these as they count any row added since they were last written (`counted_upto`).
    conn.execute(
        "INSERT INTO outbox_readings (seq, series_id, ts, value)"
        " SELECT seq, series_id, ts, value FROM outbox_staged WHERE seq <= ? ORDER BY seq",
        (upto,),
    )
    _empty_stage(conn, upto)
    conn.execute("UPDATE readings_fold SET upto = 0, next_series = 0 WHERE id = 1")
    # The newest queued reading of each series (the state sent first after an outage): the
    # readings queued by the folds since the last one, in sequence order, so the last wins.
    # Not kept per commit, where it cost a page of its own (migration 0091).
    conn.execute(
        "INSERT INTO outbox_latest (series_id, seq) SELECT series_id, seq FROM outbox_readings"
        " WHERE seq > coalesce((SELECT max(seq) FROM outbox_latest), 0) ORDER BY seq"
        " ON CONFLICT (series_id) DO UPDATE SET seq = excluded.seq"
    )


def _empty_stage(conn: sqlite3.Connection, upto: int) -> None:
    """Drop the folded rows (``seq <= upto``) from the stage, keeping those staged since.

    A ``DELETE`` with a ``WHERE`` empties the stage's pages row by row, so every one of them is
    written (WAL and checkpoint) only to be freed: a quarter of what a fold wrote. A ``DELETE``
    of a whole table without triggers frees its pages unread and unwritten
    (https://www.sqlite.org/lang_delete.html#the_truncate_optimization). So the few rows staged
    while the fold ran wait in memory, the stage is emptied whole and they go back, with their
    numbers, in the same transaction."""
    conn.execute(_KEEP_STAGED)
    conn.execute("INSERT INTO temp.stage_kept SELECT * FROM readings_stage WHERE seq > ?", (upto,))
    conn.execute("DELETE FROM readings_stage")
    conn.execute("INSERT INTO readings_stage SELECT * FROM temp.stage_kept ORDER BY seq")
    conn.execute("DELETE FROM temp.stage_kept")


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _delete_chunk(
    table: str, series_ids: list[int], before: int, limit: int, conn: sqlite3.Connection
) -> int:
    """On the writer's thread: delete at most ``limit`` rows of ``table`` older than ``before``,
    series by series along the primary key; the number deleted."""
    deleted = 0
    for series_id in series_ids:
        if deleted >= limit:
            break
        # The row at offset `room` is the first one to keep: delete everything below it.
        cursor = conn.execute(
            f"""
            DELETE FROM {table} WHERE series_id = ?1 AND ts < coalesce(
                (SELECT ts FROM {table} WHERE series_id = ?1 AND ts < ?2
                    ORDER BY ts LIMIT 1 OFFSET ?3),
                ?2)
            """,
            (series_id, before, limit - deleted),
        )
        deleted += max(cursor.rowcount, 0)
        cursor.close()
    return deleted


def _shift(conn: sqlite3.Connection, shifts: Sequence[StampShift]) -> int:
    """:meth:`ReadingStore.shift_receive_stamps` on the database's thread."""
    moved = 0
    for shift in shifts:
        found = _rows(
            conn,
            "SELECT id FROM series WHERE device_id = ? AND metric = ?",
            (shift.device_id, shift.metric),
        )
        if not found or shift.delta_ms == 0:
            continue
        sid, lo, hi, delta = int(found[0][0]), shift.first_ts, shift.last_ts, shift.delta_ms
        # Through negative stamps, which no reading has: a move shorter than the range would
        # otherwise collide with rows of the range not moved yet.
        taken = conn.execute(
            "UPDATE readings SET ts = -(ts + ?) WHERE series_id = ? AND ts BETWEEN ? AND ?"
            " AND received_ts IS NULL",
            (delta, sid, lo, hi),
        ).rowcount
        conn.execute(
            "UPDATE OR IGNORE readings SET ts = -ts WHERE series_id = ? AND ts < 0", (sid,)
        )
        kept = conn.execute(
            "UPDATE readings SET ts = -ts - ? WHERE series_id = ? AND ts < 0", (delta, sid)
        ).rowcount
        moved += taken - kept
        conn.execute(
            "UPDATE outbox_readings SET ts = ts + ? WHERE series_id = ? AND ts BETWEEN ? AND ?",
            (delta, sid, lo, hi),
        )
        for table, step in (("readings_1m", MINUTE_MS), ("readings_1h", HOUR_MS)):
            for start, end in ((lo, hi), (lo + delta, hi + delta)):
                first, upto = floor_to(start, step), floor_to(end, step) + step
                conn.execute(
                    f"DELETE FROM {table} WHERE series_id = ? AND ts >= ? AND ts < ?",
                    (sid, first, upto),
                )
                conn.execute(
                    f"INSERT INTO {table} (series_id, ts, vmin, vmax, vsum, n)"
                    " SELECT series_id, ts - ts % ?, min(value), max(value), sum(value), count(*)"
                    " FROM readings WHERE series_id = ? AND ts >= ? AND ts < ?"
                    " GROUP BY ts - ts % ?",
                    (step, sid, first, upto, step),
                )
    return moved
