"""Readings: series of (device, metric), raw values and their 1-minute and 1-hour rollups.

Timestamps are integer unix milliseconds. Where a reading lives (migrations 0002, 0015, 0090,
0117; docs/adr/0079-readings-by-time-bucket.md):

- ``readings_stage``: where a batch is committed when the store stages (the running agent). Rows
  are appended in arrival order, so a commit rewrites the stage's last page, not a page of
  every series: on an SD card, bytes written are what wears it out. A row's ``seq`` is its
  number in the sync outbox's sequence (migration 0116): the staged row is what waits for the
  cloud (``outbox_staged``, agent/sync/outbox.py), with no copy written beside it. The rows
  are in ``readings_stage_rows``, each time kept as an offset from ``readings_fold.stage_base``
  (3 bytes instead of 6, migration 0119); ``readings_stage`` is the view that adds it back,
  which every read of the stage goes through.
- ``readings``, ``readings_1m`` and ``readings_1h``, keyed ``(bucket, series_id, ts)`` with
  ``bucket = ts // BUCKET_MS`` (30 minutes; a rollup row's ``ts`` is its minute's or hour's
  start): the folded store. :meth:`ReadingStore.fold` moves the staged readings of the buckets
  that have ended there, series by series, each chunk its own short transaction: a bucket's
  rows are appended at the end of each tree, not inserted inside every series' history.
  Readings of the bucket under way stay staged. The trigger of ``readings`` keeps the rollups,
  ``readings_buckets``, ``readings_1m_buckets`` and ``readings_1h_buckets`` (the buckets
  holding rows), ``readings_latest`` (each series' newest reading) and the sync outbox.
  ``readings_fold`` records the fold under way, so a crash resumes it and a staged row is never
  counted twice. When the fold empties the stage, the folded readings the cloud has not
  acknowledged yet (during an outage, all of them) are queued in ``outbox_readings``, under
  their numbers.
- ``readings_by_series``, ``readings_1m_by_series`` and ``readings_1h_by_series``: the
  series-ordered tables of a farm from before 0117, read alongside the others and written no
  more (retention empties them).
- The views ``readings_all``, ``readings_1m_all`` and ``readings_1h_all`` show every reading
  once, folded, staged or from before 0117 (a staged reading is a rollup row of its own, count
  1). A read of one series names each table itself (:func:`_series_rows`), with the buckets
  listed so that SQLite seeks each one: a bucketed table has no order by series to range over.

A store that does not stage (``staged=False``) writes batches into ``readings`` directly.

A series holds one reading per millisecond. A reading stamped with its device's time is stored
once per (series, ts): a re-delivered message is a no-op. A reading stamped on receipt is a new
reading every time (many can arrive in one millisecond): it takes the first free millisecond at
or after its receive time, after the series' previous receive stamp; only when it carries a
device time that was set aside (a clock far off) is a reading with the same device time and
value a re-delivery, stored once. Ranges are half-open,
``start <= ts < end``; at a bucketed resolution every bucket overlapping the range is returned
whole, stamped with its start. Retention deletes whole time buckets, from the oldest.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from agent.store.db import Database
from agent.store.devices import stamp_last_readings
from agent.store.outbox_sequence import READING_BYTES, OutboxSequence
from agent.store.statement_shapes import fixed_chunks
from protocol.records import record
from protocol.timefmt import now_iso

__all__ = [
    "BUCKET_MS",
    "HOUR_MS",
    "MINUTE_MS",
    "NewReading",
    "Point",
    "ReadingStore",
    "Resolution",
    "SeriesInfo",
    "StampShift",
    "WriteOutcome",
    "bucket_of",
    "floor_to",
    "points_query",
]

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
BUCKET_MS = 1_800_000
"""Width of the time buckets that lead the keys of ``readings`` and ``readings_1m`` (fixed by
migration 0117: a fold of a whole bucket appends)."""
_TS_MAX = 2**63 - 1
# Variables per statement stay far below SQLite's limit (32766 since 3.32, 999 before).
_CHUNK = 400
# Chunks of one fold at most (each one scans the stage).
_MAX_CHUNKS = 64
# Rows per multi-row INSERT: 6 variables each.
_INSERT_ROWS = 500
# Readings staged while a fold ran, between emptying the stage and putting them back.
_KEEP_STAGED = (
    "CREATE TEMP TABLE IF NOT EXISTS stage_kept AS SELECT * FROM readings_stage_rows WHERE 0"
)
_STAGE_BASE = "SELECT stage_base FROM readings_fold WHERE id = 1"
# The newest staged reading of each series of the bucket under way, at the end of a fold.
_NEWEST_STAGED = (
    "CREATE TEMP TABLE IF NOT EXISTS stage_newest"
    " (series_id INTEGER PRIMARY KEY, ts INTEGER NOT NULL)"
)
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
    def step_ms(self) -> int:
        """Width of a rollup row, a minute or an hour (0 for raw)."""
        return _STEPS[self]


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


def bucket_of(ts: int) -> int:
    """The time bucket of ``ts`` as SQL computes it (``ts / 1800000``: truncated toward zero)."""
    return ts // BUCKET_MS if ts >= 0 else -(-ts // BUCKET_MS)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


# Per resolution: the bucketed table and the list of its buckets, the table from before 0117.
_BUCKETED = {
    Resolution.RAW: ("readings", "readings_buckets", "readings_by_series"),
    Resolution.MINUTE: ("readings_1m", "readings_1m_buckets", "readings_1m_by_series"),
    Resolution.HOUR: ("readings_1h", "readings_1h_buckets", "readings_1h_by_series"),
}


def _range(series_id: int, low: int, high: int) -> dict[str, int]:
    """The named parameters of :func:`_series_rows` for ``[low, high)``."""
    return {
        "series": series_id,
        "low": low,
        "high": high,
        "first": bucket_of(low),
        "last": bucket_of(max(high, low + 1) - 1),
    }


@functools.cache
def _series_rows(resolution: Resolution) -> str:
    """One series' rows ``:low <= ts < :high`` at a resolution (parameters: :func:`_range`),
    from every table that holds them: ``ts, value`` raw, ``ts, vmin, vmax, vsum, n`` rolled up.

    A bucketed table is searched bucket by bucket, through the list of its buckets that hold
    rows (a seek each); ``(series_id, ts)`` alone would scan it. The table from before 0117 is
    ordered by series; the stage is scanned (it has no index, and holds half an hour or so).
    """
    where = "series_id = :series AND ts >= :low AND ts < :high"
    if resolution is Resolution.RAW:
        columns, staged = "ts, value", f"SELECT ts, value FROM readings_staged WHERE {where}"
    else:
        step = resolution.step_ms
        columns = "ts, vmin, vmax, vsum, n"
        # A staged reading is a row of its own, stamped with its bucket's start.
        staged = (
            f"SELECT ts - ts % {step} AS ts, value, value, value, 1 FROM readings_staged"
            f" WHERE series_id = :series AND ts - ts % {step} >= :low"
            f" AND ts - ts % {step} < :high"
        )
    table, buckets, before = _BUCKETED[resolution]
    return (
        f"SELECT {columns} FROM {table} WHERE bucket IN"
        f" (SELECT bucket FROM {buckets} WHERE bucket BETWEEN :first AND :last) AND {where}"
        f" UNION ALL SELECT {columns} FROM {before} WHERE {where}"
        f" UNION ALL {staged}"
    )


def points_query(
    series_id: int, resolution: Resolution, start: int, end: int, bucket_ms: int = 0
) -> tuple[str, dict[str, int]]:
    """The statement of :meth:`ReadingStore.points` and its parameters: rows of ``ts, value``
    (raw, not rebucketed) or of ``ts, min, max, sum, count``."""
    if bucket_ms and bucket_ms % max(resolution.step_ms, 1):
        raise ValueError(f"bucket {bucket_ms} ms is not a multiple of {resolution}")
    rows_of = _series_rows(resolution)
    if resolution is Resolution.RAW and not bucket_ms:
        return f"SELECT ts, value FROM ({rows_of}) ORDER BY ts", _range(series_id, start, end)
    columns = (
        "min(value), max(value), sum(value), count(*)"
        if resolution is Resolution.RAW
        else "min(vmin), max(vmax), sum(vsum), sum(n)"
    )
    if not bucket_ms:
        # A bucket may have a folded row and staged readings: one point of them all.
        return (
            f"SELECT ts, {columns} FROM ({rows_of}) GROUP BY ts ORDER BY ts",
            _range(series_id, floor_to(start, resolution.step_ms), end),
        )
    low, high = floor_to(start, bucket_ms), floor_to(end - 1, bucket_ms) + bucket_ms
    return (
        f"SELECT ts - ts % :width AS slot, {columns} FROM ({rows_of}) GROUP BY slot ORDER BY slot",
        {**_range(series_id, low, high), "width": bucket_ms},
    )


@functools.cache
def _oldest_sql(resolution: Resolution) -> str:
    """The oldest ``ts`` of series ``:series`` at a resolution, staged or not."""
    staged = "ts" if resolution is Resolution.RAW else f"ts - ts % {resolution.step_ms}"
    table, buckets, before = _BUCKETED[resolution]
    parts = [
        f"(SELECT min({staged}) FROM readings_staged WHERE series_id = :series)",
        # Buckets in order, a seek each, up to the first that holds the series.
        f"(SELECT r.ts FROM {buckets} AS b CROSS JOIN {table} AS r"
        " ON r.bucket = b.bucket AND r.series_id = :series ORDER BY b.bucket, r.ts LIMIT 1)",
        f"(SELECT min(ts) FROM {before} WHERE series_id = :series)",
    ]
    return "SELECT min(ts) FROM (" + " UNION ALL ".join(f"SELECT {p} AS ts" for p in parts) + ")"


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


class ReadingStore:
    """Writes batches of readings and reads them back at any resolution."""

    def __init__(
        self,
        db: Database,
        *,
        staged: bool = False,
        fold_chunk: int = 1000,
        last_reading_every_s: float = LAST_READING_EVERY_S,
        now: Callable[[], int] = _wall_ms,
    ) -> None:
        self._db = db
        self._now = now
        """Unix milliseconds: the fold folds the buckets that ended before it."""
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
        """Readings in the stage (folded or not)."""
        return int(await self._db.fetch_value("SELECT count(*) FROM readings_stage"))

    async def foldable(self) -> int:
        """Staged readings of the time buckets that have ended: what the next fold moves."""
        until = floor_to(self._now(), BUCKET_MS)
        return int(
            await self._db.fetch_value("SELECT count(*) FROM readings_stage WHERE ts < ?", (until,))
        )

    async def fold(self, *, whole_buckets: bool = True) -> int:
        """Move the staged readings of the time buckets that have ended into ``readings`` and
        its rollups; the readings moved. Those of the bucket under way stay staged (all are
        moved when ``whole_buckets`` is false).

        Series by series in chunks of about ``fold_chunk`` readings, each its own short
        transaction (a command's write waits for one chunk at most). A bucket folded whole is
        appended at the end of the tables, each page written once, full; a bucket folded in
        parts would be split where each part lands. A fold cut short (a crash) is resumed by
        the next one from ``readings_fold``, which then folds what was staged since.
        """
        until = floor_to(self._now(), BUCKET_MS) if whole_buckets else _TS_MAX
        folded = 0
        while True:
            row = await self._db.fetch_one("SELECT upto, next_series, until_ts FROM readings_fold")
            if row is not None and int(row[0]):
                folded += await self._fold_upto(int(row[0]), int(row[1]), int(row[2]))
                continue  # a fold cut short: then the readings staged after it
            top = await self._db.fetch_value("SELECT max(seq) FROM readings_stage")
            if top is None:
                return folded
            return folded + await self._fold_upto(int(top), 0, until)

    async def _fold_upto(self, upto: int, next_series: int, until: int) -> int:
        """Fold the staged readings up to ``upto`` stamped before ``until``, from series
        ``next_series`` on."""
        # One scan, no sort (a GROUP BY over the stage sorted it in memory: megabytes of RSS):
        # series ids are dense, so equal id ranges hold about equal shares of the readings.
        row = await self._db.fetch_one(
            "SELECT min(series_id), max(series_id), count(*) FROM readings_stage"
            " WHERE seq <= ? AND series_id >= ? AND ts < ?",
            (upto, next_series, until),
        )
        folded = 0
        spans = (
            []
            if row is None or row[0] is None
            else _spans(int(row[0]), int(row[1]), int(row[2]), self._fold_chunk)
        )
        for low, high in spans:
            folded += await self._db.write(
                functools.partial(_fold_chunk, upto, until, low, high), hot=True, bulk=True
            )
        await self._db.write(
            functools.partial(_end_fold, upto, until, bool(spans) or next_series > 0),
            hot=True,
            bulk=True,
        )
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
        value = await self._db.fetch_value(_oldest_sql(resolution), {"series": series_id})
        return None if value is None else int(value)

    async def count_upto(
        self, series_id: int, resolution: Resolution, start: int, end: int, limit: int
    ) -> int:
        """Rows in the range at a resolution, counting no further than ``limit``."""
        value = await self._db.fetch_value(
            f"SELECT count(*) FROM (SELECT DISTINCT ts FROM ({_series_rows(resolution)})"
            " LIMIT :limit)",
            {**_range(series_id, floor_to(start, resolution.step_ms), end), "limit": limit},
        )
        return int(value)

    async def points(
        self, series_id: int, resolution: Resolution, start: int, end: int, bucket_ms: int = 0
    ) -> list[Point]:
        """Points of a series in a range, rebucketed to ``bucket_ms`` when it is given.

        ``bucket_ms`` must be a multiple of the resolution's own step.
        """
        sql, params = points_query(series_id, resolution, start, end, bucket_ms)
        rows = await self._db.fetch_all(sql, params)
        if resolution is Resolution.RAW and not bucket_ms:
            return [Point(ts, value, value, value, 1) for ts, value in rows]
        return [Point(ts, total / n, lo, hi, n) for ts, lo, hi, total, n in rows]

    async def delete_chunk(
        self,
        resolution: Resolution,
        before: int,
        limit: int,
        device_id: str | None = None,
    ) -> int:
        """Delete at most ``limit`` rows older than ``before`` in one short transaction (of
        every series, or of one device's); the number of rows deleted.

        Rows go by whole time buckets, the oldest first: of every series, those of the buckets
        that ended by ``before`` (a bucket's rows stay until all of them are due); of a
        device's series, those older than ``before``, bucket by bucket. Rows from before 0117
        go series by series along their primary key. Each chunk is a few index range deletes
        and writers wait for one chunk at most.
        """
        if device_id is None:
            series_ids = await self._db.fetch_all("SELECT id FROM series ORDER BY id")
        else:
            series_ids = await self._db.fetch_all(
                "SELECT id FROM series WHERE device_id = ?", (device_id,)
            )
        bounded = min(before, _TS_MAX)
        if device_id is None:
            bounded = floor_to(bounded, BUCKET_MS)
        ids = [series_id for (series_id,) in series_ids]
        # One hop to the writer's thread for the whole chunk: a farm has thousands of series,
        # and a statement each from the event loop was a round trip between the threads each.
        return await self._db.write(
            functools.partial(
                _delete_chunk, resolution, ids if device_id else None, ids, bounded, limit
            ),
            hot=True,
            bulk=True,
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
            await self.fold(whole_buckets=False)
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
        if self.staged_max is None:
            # In key order: a batch's rows of one bucket go in side by side.
            rows = sorted((bucket_of(ts), sid, ts, r) for (sid, ts), r in keyed.items())
            _insert(conn, rows)
        else:
            self._stage(conn, keyed)
        if self.staged_max is not None:
            # Devices' last_reading is stamped by the fold: stamping it here rewrote a page
            # of the devices table per device per commit.
            newest_staged = self.staged_newest
            for sid, ts in keyed:
                if ts > newest_staged.get(sid, -1):
                    newest_staged[sid] = ts
            if self.last_readings:
                stamp_last_readings(conn, self.last_readings)
            return WriteOutcome(tuple(keyed.values()), duplicates, unknown)
        # The devices' last_reading in the same transaction: a write of its own after each
        # batch cost a second commit and a second hop to this thread per batch.
        newest: dict[str, int] = {}
        for reading in keyed.values():
            if reading.ts > newest.get(reading.device_id, -1):
                newest[reading.device_id] = reading.ts
        if newest:
            stamp_last_readings(conn, newest)
        return WriteOutcome(tuple(keyed.values()), duplicates, unknown)

    def _stage(self, conn: sqlite3.Connection, keyed: Mapping[tuple[int, int], NewReading]) -> None:
        """Append the readings to the stage, each numbered from the outbox's sequence in
        memory: a staged reading's ``seq`` is its outbox number, so the stage row is what waits
        for the cloud (no copy, and no page of a counter rewritten per commit: 0092, 0116)."""
        if not keyed:
            return
        assert self.sequence is not None, "a staged batch numbers its readings"
        seq = self.sequence.reserve(conn, len(keyed))
        base = int(conn.execute(_STAGE_BASE).fetchone()[0])
        for chunk in fixed_chunks(keyed.items(), _INSERT_ROWS):
            _rows(
                conn,
                "INSERT INTO readings_stage_rows (seq, series_id, dts, value, raw, received_ts,"
                " device_ts) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(chunk)),
                [
                    part
                    for index, ((sid, ts), r) in enumerate(chunk, start=seq + 1)
                    for part in (index, sid, ts - base, r.value, r.raw, r.received_ts, r.device_ts)
                ],
            )
            seq += len(chunk)

    def _not_redelivered(
        self, conn: sqlite3.Connection, received: list[tuple[int, NewReading]]
    ) -> list[tuple[int, NewReading]]:
        """Receive-stamped readings minus re-deliveries (same device time and value)."""
        seen: set[tuple[int, int, float]] = set()
        timed = [(sid, r.device_ts) for sid, r in received if r.device_ts is not None]
        # By the device time (an index of each table): where the receive stamp put it is not
        # known.
        rows = _probe(
            conn,
            timed,
            "SELECT r.series_id, r.device_ts, r.value FROM k CROSS JOIN readings r"
            " ON r.series_id = k.column1 AND r.device_ts = k.column2"
            " UNION ALL SELECT r.series_id, r.device_ts, r.value FROM k"
            " CROSS JOIN readings_by_series r"
            " ON r.series_id = k.column1 AND r.device_ts = k.column2",
        )
        seen.update((row[0], row[1], row[2]) for row in rows)
        if timed and self.staged_max is not None:
            for chunk in fixed_chunks({sid for sid, _ in timed}, _CHUNK):
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
        # A range cut at bucket boundaries: each piece is one seek of (bucket, series).
        pieces = [
            (bucket, sid, max(low, bucket * BUCKET_MS), min(high, (bucket + 1) * BUCKET_MS - 1))
            for sid, low, high in ranges
            for bucket in range(bucket_of(low), bucket_of(high) + 1)
        ]
        rows = _probe(
            conn,
            pieces,
            "SELECT r.series_id, r.ts FROM k CROSS JOIN readings r"
            " ON r.bucket = k.column1 AND r.series_id = k.column2"
            " AND r.ts >= k.column3 AND r.ts <= k.column4",
        ) + _probe(
            conn,
            ranges,
            "SELECT r.series_id, r.ts FROM k CROSS JOIN readings_by_series r"
            " ON r.series_id = k.column1 AND r.ts >= k.column2 AND r.ts <= k.column3",
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
        for chunk in fixed_chunks(wanted, _CHUNK):
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
        for chunk in fixed_chunks({entry.id for entry in cached.values()}, _CHUNK):
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
        rows = _probe(
            conn,
            ((bucket_of(ts), sid, ts) for sid, ts in keys),
            "SELECT r.series_id, r.ts FROM k CROSS JOIN readings r"
            " ON r.bucket = k.column1 AND r.series_id = k.column2 AND r.ts = k.column3"
            " UNION ALL SELECT r.series_id, r.ts FROM k CROSS JOIN readings_by_series r"
            " ON r.series_id = k.column2 AND r.ts = k.column3",
        )
        return [(row[0], row[1]) for row in rows]


def _spans(first: int, last: int, rows: int, size: int) -> list[tuple[int, int]]:
    """Series id ranges ``[low, high)`` covering ``first..last``, as many as ``rows`` readings
    make chunks of about ``size``, and no more than ``_MAX_CHUNKS``: each chunk scans the
    stage (it has no index), so a large stage (a backlog) is folded in larger chunks."""
    count = max(1, min(last - first + 1, -(-rows // max(size, 1)), _MAX_CHUNKS))
    width = -(-(last - first + 1) // count)
    return [(low, min(low + width, last + 1)) for low in range(first, last + 1, width)]


def _fold_chunk(upto: int, until: int, low: int, high: int, conn: sqlite3.Connection) -> int:
    """Fold the staged readings (seq <= ``upto``, ts < ``until``) of series ``[low, high)``;
    how many moved."""
    conn.execute(
        "UPDATE readings_fold SET upto = ?, next_series = ?, until_ts = ? WHERE id = 1",
        (upto, high, until),
    )
    # The stage holds no duplicate of a stored reading (the batch checked): OR IGNORE is for a
    # chunk done again after a crash, whose rows are in `readings` already.
    cursor = conn.execute(
        "INSERT OR IGNORE INTO readings"
        " (bucket, series_id, ts, value, raw, received_ts, device_ts)"
        " SELECT ts / ?, series_id, ts, value, raw, received_ts, device_ts FROM readings_stage"
        " WHERE seq <= ? AND ts < ? AND series_id >= ? AND series_id < ?"
        " ORDER BY 1, series_id, ts",
        (BUCKET_MS, upto, until, low, high),
    )
    return max(cursor.rowcount, 0)


def _end_fold(upto: int, until: int, moved: bool, conn: sqlite3.Connection) -> None:
    """Stamp the devices' last reading (of every reading staged up to ``upto``, folded or
    not); when any were ``moved``, queue the folded rows the cloud has not acknowledged for
    it and drop the folded rows from the stage; end the fold.

    The newest of the folded readings are in ``readings_latest`` already (the trigger of
    ``readings`` keeps it); only those of the bucket under way are looked for in the stage,
    each series' newest kept in a small table as the stage is scanned. A ``GROUP BY`` sorted
    the readings it grouped in memory: some 20 MB of the agent's peak at each fold of 500
    devices' half hour over the whole stage, and 7 MB over a bucket under way of 200,000
    readings (a fold during an outage's backlog)."""
    conn.execute(_NEWEST_STAGED)
    conn.execute(
        "INSERT INTO temp.stage_newest (series_id, ts)"
        " SELECT series_id, ts FROM readings_stage WHERE seq <= ? AND ts >= ?"
        " ON CONFLICT (series_id) DO UPDATE SET ts = max(ts, excluded.ts)",
        (upto, until),
    )
    rows = conn.execute(
        "SELECT s.device_id, max(n.ts) FROM ("
        " SELECT series_id, ts FROM readings_latest"
        " UNION ALL"
        " SELECT series_id, ts FROM temp.stage_newest"
        ") AS n JOIN series AS s ON s.id = n.series_id GROUP BY s.device_id"
    ).fetchall()
    conn.execute("DELETE FROM temp.stage_newest")
    if rows:
        stamp_last_readings(conn, {str(device): int(ts) for device, ts in rows})
    if moved:
        _queue_folded(conn, upto, until)
        _empty_stage(conn, upto, until)
        conn.execute("UPDATE readings_fold SET upto = 0, next_series = 0 WHERE id = 1")
    # The newest queued reading of each series (the state sent first after an outage): the
    # readings queued by the folds since the last one, in sequence order, so the last wins.
    # Not kept per commit, where it cost a page of its own (migration 0091).
    conn.execute(
        "INSERT INTO outbox_latest (series_id, seq) SELECT series_id, seq FROM outbox_readings"
        " WHERE seq > coalesce((SELECT max(seq) FROM outbox_latest), 0) ORDER BY seq"
        " ON CONFLICT (series_id) DO UPDATE SET seq = excluded.seq"
    )


def _queue_folded(conn: sqlite3.Connection, upto: int, until: int) -> None:
    """Queue the folded readings (``seq <= upto``, ``ts < until``) the cloud has not
    acknowledged yet (during an outage: all of them) in ``outbox_readings``, under their own
    numbers: the stage is emptied, and an outage's backlog is kept, compacted and moved by a
    clock jump there.

    The outbox's running totals count the rows of ``outbox_readings`` above ``counted_upto``
    when they are read. A reading of the bucket that was under way at the last fold may have a
    lower number than one folded then (a device's clock a little behind another's), so the
    rows queued here at or below that mark are counted in now."""
    conn.execute(
        "UPDATE outbox_stats SET records = records + c.n, bytes = bytes + c.n * ?"
        " FROM (SELECT count(*) AS n FROM outbox_staged WHERE seq <= ? AND ts < ?"
        "       AND seq <= (SELECT counted_upto FROM outbox_stats WHERE id = 1)) AS c"
        " WHERE id = 1 AND c.n > 0",
        (READING_BYTES, upto, until),
    )
    conn.execute(
        "INSERT INTO outbox_readings (seq, series_id, ts, value)"
        " SELECT seq, series_id, ts, value FROM outbox_staged WHERE seq <= ? AND ts < ?"
        " ORDER BY seq",
        (upto, until),
    )


def _empty_stage(conn: sqlite3.Connection, upto: int, until: int) -> None:
    """Drop the folded rows (``seq <= upto``, ``ts < until``) from the stage, keeping those
    staged since and those of the bucket under way.

    A ``DELETE`` with a ``WHERE`` empties the stage's pages row by row, so every one of them is
    written (WAL and checkpoint) only to be freed: a quarter of what a fold wrote. A ``DELETE``
    of a whole table without triggers frees its pages unread and unwritten
    (https://www.sqlite.org/lang_delete.html#the_truncate_optimization). So the few rows staged
    while the fold ran wait in memory, the stage is emptied whole and they go back, with their
    numbers, in the same transaction. The fold runs shortly after a bucket ends, so those of
    the bucket under way are a minute's readings or so.

    The stage's base time (migration 0119) moves to ``until``, the start of the bucket under
    way, and the rows kept are re-based: the readings staged next are stamped close to it."""
    base = int(conn.execute(_STAGE_BASE).fetchone()[0])
    rebase = until if until < _TS_MAX else base
    conn.execute(_KEEP_STAGED)
    conn.execute(
        "INSERT INTO temp.stage_kept SELECT * FROM readings_stage_rows"
        " WHERE seq > ? OR dts + ? >= ?",
        (upto, base, until),
    )
    conn.execute("DELETE FROM readings_stage_rows")
    conn.execute("UPDATE readings_fold SET stage_base = ? WHERE id = 1", (rebase,))
    conn.execute(
        "INSERT INTO readings_stage_rows (seq, series_id, dts, value, raw, received_ts,"
        " device_ts) SELECT seq, series_id, dts + ?, value, raw, received_ts, device_ts"
        " FROM temp.stage_kept ORDER BY seq",
        (base - rebase,),
    )
    conn.execute("DELETE FROM temp.stage_kept")


def _insert(conn: sqlite3.Connection, keyed: list[tuple[Any, ...]]) -> None:
    """Insert readings, each given as ``(bucket, series_id, ts, reading)``, into ``readings``."""
    # Many rows per statement: each statement is one hop without the GIL, and a thread that
    # needs the GIL back once per row waits out the busy event loop every time.
    for chunk in fixed_chunks(keyed, _INSERT_ROWS):
        _rows(
            conn,
            "INSERT OR IGNORE INTO readings"
            " (bucket, series_id, ts, value, raw, received_ts, device_ts) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(chunk)),
            [
                part
                for bucket, sid, ts, r in chunk
                for part in (bucket, sid, ts, r.value, r.raw, r.received_ts, r.device_ts)
            ],
        )


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _probe(conn: sqlite3.Connection, keys: Iterable[tuple[Any, ...]], sql: str) -> list[Any]:
    """The rows ``sql`` finds for ``keys`` (tuples of one width), in chunks: in ``sql``, ``k``
    is a table of the keys. A join on it probes a table's key once per key, where
    ``(a, b) IN (VALUES ...)`` would scan the table."""
    found: list[Any] = []
    for chunk in fixed_chunks(keys, _CHUNK):
        row = "(" + ", ".join("?" * len(chunk[0])) + ")"
        values = ", ".join([row] * len(chunk))
        params = [part for key in chunk for part in key]
        found += _rows(conn, f"WITH k AS (VALUES {values}) {sql}", params)
    return found


def _delete_chunk(
    resolution: Resolution,
    device_series: list[int] | None,
    series_ids: list[int],
    before: int,
    limit: int,
    conn: sqlite3.Connection,
) -> int:
    """On the writer's thread: :meth:`ReadingStore.delete_chunk` (``device_series``: the
    series of the device whose rows go, None for every series'); the number deleted."""
    table, buckets, old = _BUCKETED[resolution]
    deleted = _delete_by_series(old, series_ids, before, limit, conn)
    if device_series is None:
        deleted += _delete_buckets(table, buckets, before, limit - deleted, conn)
    else:
        for series_id in device_series:
            deleted += _delete_of_series(table, buckets, series_id, before, limit - deleted, conn)
    if deleted < limit and resolution is Resolution.RAW:
        # All due rows are gone: so is the newest reading of a series that had no other.
        if device_series is None:
            conn.execute("DELETE FROM readings_latest WHERE ts < ?", (before,))
        else:
            conn.executemany(
                "DELETE FROM readings_latest WHERE series_id = ? AND ts < ?",
                [(series_id, before) for series_id in device_series],
            )
    return deleted


def _delete_by_series(
    table: str, series_ids: list[int], before: int, limit: int, conn: sqlite3.Connection
) -> int:
    """Delete at most ``limit`` rows of a series-ordered ``table`` older than ``before``,
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


def _delete_buckets(
    table: str, buckets: str, before: int, limit: int, conn: sqlite3.Connection
) -> int:
    """Delete at most ``limit`` rows of the buckets of a bucketed ``table`` that end by
    ``before`` (a bucket boundary), from the oldest bucket; the number deleted."""
    deleted = 0
    due = conn.execute(
        f"SELECT bucket FROM {buckets} WHERE bucket < ? ORDER BY bucket", (bucket_of(before),)
    ).fetchall()
    for (bucket,) in due:
        if deleted >= limit:
            break
        # The row at offset `room` is the first one to keep: delete everything below it.
        keep = conn.execute(
            f"SELECT series_id, ts FROM {table} WHERE bucket = ? ORDER BY series_id, ts"
            " LIMIT 1 OFFSET ?",
            (bucket, limit - deleted),
        ).fetchone()
        if keep is None:
            cursor = conn.execute(f"DELETE FROM {table} WHERE bucket = ?", (bucket,))
            conn.execute(f"DELETE FROM {buckets} WHERE bucket = ?", (bucket,))
        else:
            cursor = conn.execute(
                f"DELETE FROM {table} WHERE bucket = ? AND (series_id, ts) < (?, ?)",
                (bucket, *keep),
            )
        deleted += max(cursor.rowcount, 0)
    return deleted


def _delete_of_series(
    table: str,
    buckets: str,
    series_id: int,
    before: int,
    limit: int,
    conn: sqlite3.Connection,
) -> int:
    """Delete at most ``limit`` rows of one series older than ``before`` from a bucketed
    ``table``, a bucket at a time (a seek each), the oldest first; the number deleted."""
    if limit <= 0:
        return 0
    keep = conn.execute(
        f"SELECT r.bucket, r.ts FROM {buckets} AS b CROSS JOIN {table} AS r"
        " ON r.bucket = b.bucket AND r.series_id = ?1 AND r.ts < ?2"
        " WHERE b.bucket <= ?3 ORDER BY b.bucket, r.ts LIMIT 1 OFFSET ?4",
        (series_id, before, bucket_of(before), limit),
    ).fetchone()
    last, until = (bucket_of(before), before) if keep is None else (int(keep[0]), int(keep[1]))
    cursor = conn.execute(
        f"DELETE FROM {table} WHERE bucket IN (SELECT bucket FROM {buckets} WHERE bucket < ?)"
        " AND series_id = ?",
        (last, series_id),
    )
    deleted = max(cursor.rowcount, 0)
    cursor = conn.execute(
        f"DELETE FROM {table} WHERE bucket = ? AND series_id = ? AND ts < ?",
        (last, series_id, until),
    )
    return deleted + max(cursor.rowcount, 0)


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
        # The buckets the readings move into hold rows from now on (an UPDATE fires no
        # trigger); those they leave are listed already.
        conn.executemany(
            "INSERT OR IGNORE INTO readings_buckets (bucket) VALUES (?)",
            [(b,) for b in range(bucket_of(lo + delta), bucket_of(hi + delta) + 1)],
        )
        moved += _shift_bucketed(conn, sid, lo, hi, delta)
        moved += _shift_by_series(conn, sid, lo, hi, delta)
        conn.execute(
            "UPDATE outbox_readings SET ts = ts + ? WHERE series_id = ? AND ts BETWEEN ? AND ?",
            (delta, sid, lo, hi),
        )
        for start, end in ((lo, hi), (lo + delta, hi + delta)):
            _roll_up_again(conn, sid, start, end)
        conn.execute(
            "INSERT OR REPLACE INTO readings_latest (series_id, ts, value)"
            " SELECT ?1, ts, value FROM ("
            "  SELECT * FROM (SELECT r.ts, r.value FROM readings_buckets AS b"
            "   CROSS JOIN readings AS r ON r.bucket = b.bucket AND r.series_id = ?1"
            "   ORDER BY b.bucket DESC, r.ts DESC LIMIT 1)"
            "  UNION ALL SELECT * FROM (SELECT ts, value FROM readings_by_series"
            "   WHERE series_id = ?1 ORDER BY ts DESC LIMIT 1)"
            " ) ORDER BY ts DESC LIMIT 1",
            (sid,),
        )
    return moved


def _shift_bucketed(conn: sqlite3.Connection, sid: int, lo: int, hi: int, delta: int) -> int:
    """Move the series' readings of ``readings`` in ``[lo, hi]`` stamped on receipt by
    ``delta``, each to the bucket of its new time; the number moved."""
    # The buckets the readings leave, each sought with the series (the list of the buckets
    # holding rows, filtered: SQLite seeks each one instead of scanning the range).
    leaving = "bucket IN (SELECT bucket FROM readings_buckets WHERE bucket BETWEEN ? AND ?)"
    span = (bucket_of(lo), bucket_of(hi))
    # Through negative stamps, which no reading has, in the bucket it leaves: a move shorter
    # than the range would otherwise collide with rows of the range not moved yet.
    taken = conn.execute(
        f"UPDATE readings SET ts = -(ts + ?) WHERE {leaving} AND series_id = ?"
        " AND ts BETWEEN ? AND ? AND received_ts IS NULL",
        (delta, *span, sid, lo, hi),
    ).rowcount
    # A millisecond taken in either table keeps the reading where it was.
    conn.execute(
        f"UPDATE OR IGNORE readings SET ts = -ts, bucket = -ts / ? WHERE {leaving}"
        " AND series_id = ? AND ts < 0 AND NOT EXISTS (SELECT 1 FROM readings_by_series AS o"
        " WHERE o.series_id = readings.series_id AND o.ts = -readings.ts)",
        (BUCKET_MS, *span, sid),
    )
    kept = conn.execute(
        f"UPDATE readings SET ts = -ts - ? WHERE {leaving} AND series_id = ? AND ts < 0",
        (delta, *span, sid),
    ).rowcount
    return taken - kept


def _shift_by_series(conn: sqlite3.Connection, sid: int, lo: int, hi: int, delta: int) -> int:
    """:func:`_shift_bucketed` for ``readings_by_series``, the readings from before 0117."""
    taken = conn.execute(
        "UPDATE readings_by_series SET ts = -(ts + ?) WHERE series_id = ? AND ts BETWEEN ? AND ?"
        " AND received_ts IS NULL",
        (delta, sid, lo, hi),
    ).rowcount
    if not taken:
        return 0
    conn.execute(
        "UPDATE OR IGNORE readings_by_series SET ts = -ts WHERE series_id = ? AND ts < 0"
        " AND NOT EXISTS (SELECT 1 FROM readings AS r WHERE r.bucket = -readings_by_series.ts / ?"
        " AND r.series_id = readings_by_series.series_id AND r.ts = -readings_by_series.ts)",
        (sid, BUCKET_MS),
    )
    kept = conn.execute(
        "UPDATE readings_by_series SET ts = -ts - ? WHERE series_id = ? AND ts < 0", (delta, sid)
    ).rowcount
    return taken - kept


def _roll_up_again(conn: sqlite3.Connection, sid: int, start: int, end: int) -> None:
    """Recompute the series' 1-minute and hourly rollups of the buckets overlapping
    ``[start, end]`` from its raw readings, wherever they are kept."""
    for resolution in (Resolution.MINUTE, Resolution.HOUR):
        table, buckets, before = _BUCKETED[resolution]
        step = resolution.step_ms
        first, upto = floor_to(start, step), floor_to(end, step) + step
        params = {**_range(sid, first, upto), "step": step}
        where = "series_id = :series AND ts >= :low AND ts < :high"
        raw = (
            "SELECT ts, value FROM readings WHERE bucket IN (SELECT bucket FROM readings_buckets"
            f" WHERE bucket BETWEEN :first AND :last) AND {where}"
            f" UNION ALL SELECT ts, value FROM readings_by_series WHERE {where}"
        )
        conn.execute(
            f"DELETE FROM {table} WHERE bucket IN (SELECT bucket FROM {buckets}"
            f" WHERE bucket BETWEEN :first AND :last) AND {where}",
            params,
        )
        conn.execute(f"DELETE FROM {before} WHERE {where}", params)
        # The buckets the rows may land in are listed (an INSERT here fires no trigger).
        conn.executemany(
            f"INSERT OR IGNORE INTO {buckets} (bucket) VALUES (?)",
            [(b,) for b in range(params["first"], params["last"] + 1)],
        )
        conn.execute(
            f"INSERT INTO {table} (bucket, series_id, ts, vmin, vmax, vsum, n)"
            f" SELECT ts / {BUCKET_MS}, :series, ts, min(value), max(value), sum(value), count(*)"
            f" FROM (SELECT ts - ts % :step AS ts, value FROM ({raw})) GROUP BY ts",
            params,
        )
