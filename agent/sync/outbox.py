"""The outbox (agent migrations 0008, 0030, 0092 and 0116): what waits for the cloud, in one
sequence.

Three kinds of rows share the sequence: changes of entities (``outbox``, JSON, written by the
triggers of migration 0008 and later), raw readings and rollups that replaced readings when the
outbox was over its cap (``outbox_rollups``). A raw reading waits in one of two places:

- staged (``outbox_staged``, the rows of ``readings_stage`` above ``outbox_stats.staged_acked``):
  the staged row itself, numbered from :class:`agent.store.outbox_sequence.OutboxSequence` by
  the batch that commits it. The uploader takes staged readings in sequence order, so those the
  cloud committed are always the stage's lowest numbers: an acknowledgement raises
  ``staged_acked`` over them and deletes no row (the fold empties the stage whole);
- ``outbox_readings``, one narrow row each: where the fold queues the staged readings the cloud
  has not acknowledged yet (an outage's backlog), or the trigger of migration 0092 a reading
  written into ``readings`` directly. Compaction rolls up these; the stage holds at most a
  fold's worth.

The uploader takes rows and marks them in flight in the same write transaction, posts them,
and deletes exactly those rows (raises ``staged_acked`` over those staged) once the cloud's
answer says they are committed. A row in flight is sent again unchanged until an answer is
seen, and compaction never touches it, so a batch the cloud may already hold is never folded
into a rollup (which would count its readings twice). While one batch waits for its answer
the uploader may take the next beside it (:meth:`OutboxStore.take_beside`), above everything
in flight. Compaction (:mod:`agent.sync.compactor`) runs as aggregate statements inside SQLite
over bounded ranges, each in a short transaction.

Sequence ranges: a batch claims, for each of its rows, ``(prev, next - 1]`` where ``prev`` is
the highest number still queued below it and ``next`` the lowest above it (or the one above
the highest number committed writes show handed out: a reading commit still open holds
numbers of its own). A number no longer queued was either committed in the cloud or folded into a
rollup that took the lowest number of what it replaced (so a queued row at or below it holds
its content, and that row's own number stays unclaimed until it is sent). So the cloud's
contiguous acknowledgement always advances, even when a row above was sent before compaction
folded the rows below it, and it never passes a number whose content is still queued or
not yet committed.
"""

from __future__ import annotations

import bisect
import sqlite3
import time
from array import array
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

import aiosqlite

from agent.store.db import Database
from agent.store.outbox_sequence import HIGHEST_COMMITTED
from agent.sync.outbox_rows import (
    HOUR_MS,
    MINUTE_MS,
    READING_BYTES,
    ROLLUP_BYTES,
    Compaction,
    EntityRow,
    OutboxFigures,
    Readings,
    Rollups,
    Selection,
)
from protocol.sync import merge_ranges

__all__ = ["COUNT_IN_ROWS", "OutboxStore"]

# Rows deleted per transaction once the cloud committed them.
_ACK_ROWS = 5_000
_ENTITY = "seq, lane, kind, entity, entity_id, op, payload, bytes"
_READING = "seq, series_id, ts, value"
_R_COLUMNS = "r.seq, r.series_id, r.ts, r.value"
_ROLLUP = "seq, series_id, width_ms, ts, vmin, vmax, vsum, n"
_NOT_IN_FLIGHT = (
    "NOT EXISTS (SELECT 1 FROM outbox_inflight AS i WHERE r.seq > i.lo AND r.seq <= i.hi)"
)
# Readings and rollups in flight above ?1, lowest numbers first, the first ?2 of both kinds
# together. A reading's row has no width (column 5), a rollup's always has one.
_IN_FLIGHT = f"""
    SELECT {_R_COLUMNS}, NULL, NULL, NULL, NULL FROM outbox_inflight AS i
        JOIN outbox_readings AS r ON r.seq > i.lo AND r.seq <= i.hi WHERE r.seq > ?1
    UNION ALL SELECT {_R_COLUMNS}, NULL, NULL, NULL, NULL FROM outbox_inflight AS i
        JOIN outbox_staged AS r ON r.seq > i.lo AND r.seq <= i.hi WHERE r.seq > ?1
    UNION ALL SELECT seq, series_id, ts, vmin, width_ms, vmax, vsum, n FROM outbox_rollups
        WHERE inflight = 1 AND seq > ?1
    ORDER BY 1 LIMIT ?2
"""
# The highest number still queued below ?1, in any of the three tables or the stage.
_PREV = (
    "max(coalesce((SELECT max(seq) FROM outbox WHERE seq < ?1), 0),"
    " coalesce((SELECT max(seq) FROM outbox_readings WHERE seq < ?1), 0),"
    " coalesce((SELECT max(seq) FROM outbox_staged WHERE seq < ?1), 0),"
    " coalesce((SELECT max(seq) FROM outbox_rollups WHERE seq < ?1), 0))"
)
# The lowest number still queued above ?1, or the next number to be given.
_NEXT = (
    "min(coalesce((SELECT min(seq) FROM outbox WHERE seq > ?1), ?2),"
    " coalesce((SELECT min(seq) FROM outbox_readings WHERE seq > ?1), ?2),"
    " coalesce((SELECT min(seq) FROM outbox_staged WHERE seq > ?1), ?2),"
    " coalesce((SELECT min(seq) FROM outbox_rollups WHERE seq > ?1), ?2))"
)
# Whether a queued reading not in flight lies below an in-flight range: in a gap between two
# ranges, or below the first (one probe of the readings' key per range).
_QUEUED_BELOW_IN_FLIGHT = """
    SELECT EXISTS (
        SELECT 1 FROM (SELECT lag(hi, 1, 0) OVER (ORDER BY lo) AS above, lo AS upto
                       FROM outbox_inflight) AS gap
        WHERE EXISTS (SELECT 1 FROM outbox_readings WHERE seq > gap.above AND seq <= gap.upto)
           OR EXISTS (SELECT 1 FROM outbox_staged WHERE seq > gap.above AND seq <= gap.upto))
"""
# Whether any reading or rollup is queued, in flight or not (three probes of a key).
_ANY_QUEUED = (
    "SELECT EXISTS (SELECT 1 FROM outbox_staged) OR EXISTS (SELECT 1 FROM outbox_readings)"
    " OR EXISTS (SELECT 1 FROM outbox_rollups WHERE inflight = 0)"
)
# Queued readings the running totals do not include yet (migration 0092).
_UNCOUNTED = (
    "SELECT count(*) FROM outbox_readings"
    " WHERE seq > (SELECT counted_upto FROM outbox_stats WHERE id = 1)"
)
# Staged readings waiting for the cloud (0116): never in the running totals, which an
# acknowledgement of staged readings does not write; at most a fold's worth, a range of the
# stage's key.
_STAGED = "SELECT count(*) FROM outbox_staged"
_COUNT_IN = f"""
    UPDATE outbox_stats SET records = records + c.n, bytes = bytes + c.n * {READING_BYTES},
        counted_upto = c.top
    FROM (SELECT count(*) AS n, max(seq) AS top FROM outbox_readings
          WHERE seq > (SELECT counted_upto FROM outbox_stats WHERE id = 1)) AS c
    WHERE id = 1 AND c.n > 0
"""
# Uncounted readings that make the next check of the totals count them in (a write).
COUNT_IN_ROWS = 10_000
_STAGE = """
    CREATE TEMP TABLE IF NOT EXISTS outbox_stage (
        seq INTEGER, series_id INTEGER, width_ms INTEGER, ts INTEGER,
        vmin REAL, vmax REAL, vsum REAL, n INTEGER
    )
"""
_MERGE_STAGE = """
    INSERT INTO outbox_rollups (seq, series_id, width_ms, ts, vmin, vmax, vsum, n)
    SELECT seq, series_id, width_ms, ts, vmin, vmax, vsum, n FROM temp.outbox_stage WHERE true
    ON CONFLICT (series_id, width_ms, ts) WHERE inflight = 0 DO UPDATE SET
        vmin = min(vmin, excluded.vmin), vmax = max(vmax, excluded.vmax),
        vsum = vsum + excluded.vsum, n = n + excluded.n, seq = min(seq, excluded.seq)
"""
_STAGED_MERGES = """
    SELECT count(*) FROM temp.outbox_stage AS s WHERE EXISTS (
        SELECT 1 FROM outbox_rollups AS o
        WHERE o.series_id = s.series_id AND o.width_ms = s.width_ms AND o.ts = s.ts
          AND o.inflight = 0)
"""


def _entities(found: Iterable[Any]) -> list[EntityRow]:
    return [EntityRow(*tuple(r)) for r in found]


def _add_bulk(found: Iterable[Any], readings: Readings, rollups: Rollups) -> None:
    """Rows of :data:`_IN_FLIGHT` added to the columns of their kind."""
    for seq, series_id, ts, value, width_ms, vmax, vsum, n in found:
        if width_ms is None:
            readings.append((seq, series_id, ts, value))
        else:
            rollups.append((seq, series_id, width_ms, ts, value, vmax, vsum, n))


def _holds(ordered: Sequence[int], seq: int) -> bool:
    """Whether ``seq`` is one of ``ordered`` (ascending)."""
    at = bisect.bisect_left(ordered, seq)
    return at < len(ordered) and ordered[at] == seq


def _chunks(values: Sequence[int], size: int = 500) -> Iterable[Sequence[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class OutboxStore:
    """Reads, marks, trims and compacts the outbox."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.uncounted = 0
        """Queued readings the stored totals did not include at the last :meth:`figures`."""

    # Taking rows for a batch ----------------------------------------------------------------

    async def in_flight(
        self, limit: int, *, above: int = 0, with_entities: bool = False
    ) -> Selection:
        """Rows posted before whose answer was never seen (sent again first, unchanged), or
        taken and not yet posted; lowest numbers first, those above ``above`` only.

        ``with_entities``: preceded by the entity changes still queued, as :meth:`take` puts
        them. Entities are never marked in flight, so a batch refused as a whole (a 409 for a
        clock far off, a 503) is resent as its readings alone unless they are added again; the
        cloud would then meet readings of a device it does not hold yet (issue 30)."""
        entities: list[EntityRow] = []
        if with_entities:
            readings, rollups = await self._in_flight_bulk(1, above)
            if not readings and not rollups:
                return Selection()
            entities = await self._queued_entities(limit)
        room = limit - len(entities)
        if room <= 0:
            return Selection(entities[:limit])
        readings, rollups = await self._in_flight_bulk(room, above)
        if not readings and not rollups:
            return Selection()
        return Selection(entities, readings, rollups)

    async def _in_flight_bulk(self, room: int, above: int) -> tuple[Readings, Rollups]:
        """The ``room`` lowest readings and rollups in flight above ``above``, in one ordered
        read of both kinds: never more rows than the batch holds (nor their row objects)."""
        readings, rollups = Readings(), Rollups()
        async for chunk in self._db.fetch_chunks(_IN_FLIGHT, (above, room)):
            _add_bulk(chunk, readings, rollups)
        return readings, rollups

    async def _queued_entities(self, limit: int) -> list[EntityRow]:
        """The first ``limit`` entity changes queued: lane (events first), then sequence."""
        return _entities(
            await self._db.fetch_all(
                f"SELECT {_ENTITY} FROM outbox ORDER BY lane, seq LIMIT ?", (limit,)
            )
        )

    async def take(
        self, limit: int, *, latest_first: bool = False, ride_s: float | None = None
    ) -> Selection:
        """Mark the next rows in flight and return them: entity changes first (events,
        configuration, calibrations); then, with ``latest_first``, the newest reading of every
        series; else the oldest readings and rollups. The mark is a short write transaction
        that moves no row through Python (compaction skips what is marked); the rows are read
        after it, once it is durable.

        ``ride_s``: the mark may wait that long for a commit made anyway, a reading batch's,
        and run inside it (see :meth:`Database.write`): at a farm's trickle, not while a
        backlog drains."""
        entities = await self._queued_entities(limit)
        room = limit - len(entities)
        if room <= 0:
            return Selection(entities)
        if ride_s is not None and not await self._db.fetch_value(_ANY_QUEUED):
            return Selection(entities)  # a quiet farm's heartbeat: no mark to wait for

        def mark(conn: sqlite3.Connection) -> None:
            if latest_first:
                conn.execute(
                    "INSERT OR IGNORE INTO outbox_inflight (lo, hi) SELECT r.seq - 1, r.seq"
                    " FROM outbox_latest AS l JOIN outbox_readings AS r ON r.seq = l.seq"
                    f" WHERE {_NOT_IN_FLIGHT} ORDER BY r.seq LIMIT ?",
                    (room,),
                ).close()
            else:
                _mark_oldest(conn, room)

        await self._db.write(mark, hot=True, ride_s=ride_s)
        rest = await self.in_flight(room)
        return Selection(entities, rest.readings, rest.rollups)

    async def take_beside(
        self, limit: int, posting: Selection, *, max_bytes: int | None = None
    ) -> Selection | None:
        """Mark the next rows in flight while ``posting`` (the lowest rows in flight) waits for
        its answer, and return them: entity changes not in it, then the oldest readings and
        rollups not in flight. ``None`` (nothing marked) while a queued reading lies below one
        in flight, as the backfill behind a batch of the latest state does: those wait until
        nothing is in flight; and while the outbox has less than ``posting``'s size left under
        ``max_bytes``: compaction cannot fold rows in flight, so a second batch is pinned only
        where the cap still holds it, and the outbox passes its cap by one batch at most.

        So every reading taken here lies above every reading in flight. A resend after a
        crash, lowest numbers first, may put rows of both batches into one block of a series;
        the block's number (its highest) is then one of this batch's, which the cloud cannot
        hold before it holds the block, so the block is applied and the readings it already
        holds change nothing. Taken below, a backfill reading could share a block numbered by
        a reading of ``posting`` the cloud already applied, and the cloud would skip it."""
        skip = f"[{','.join(str(r.seq) for r in posting.entities)}]"
        entities = _entities(
            await self._db.fetch_all(
                f"SELECT {_ENTITY} FROM outbox WHERE seq NOT IN (SELECT value FROM json_each(?))"
                " ORDER BY lane, seq LIMIT ?",
                (skip, limit),
            )
        )
        room = limit - len(entities)
        if room <= 0:
            return Selection(entities)

        def mark(conn: sqlite3.Connection) -> tuple[tuple[int, int] | None, Rollups] | None:
            if _scalar(conn, _QUEUED_BELOW_IN_FLIGHT):
                return None
            if max_bytes is not None:
                queued = _scalar(conn, "SELECT bytes FROM outbox_stats WHERE id = 1")
                waiting = int(_scalar(conn, _UNCOUNTED)) + int(_scalar(conn, _STAGED))
                if int(queued) + READING_BYTES * waiting + posting.bytes > max_bytes:
                    return None
            floor = _scalar(conn, "SELECT coalesce(max(hi), 0) FROM outbox_inflight")
            return _mark_oldest(conn, room, floor=int(floor))

        # Beside a batch being posted: a backlog drains, and its marks commit at once.
        marked = await self._db.write(mark, hot=True)
        if marked is None:
            return None
        span, rollups = marked
        readings = Readings()
        if span is not None:
            async for chunk in self._db.fetch_chunks(
                f"SELECT {_READING} FROM outbox_readings WHERE seq > ?1 AND seq <= ?2"
                f" UNION ALL SELECT {_READING} FROM outbox_staged WHERE seq > ?1 AND seq <= ?2"
                " ORDER BY 1",
                span,
            ):
                readings.extend(chunk)
        return Selection(entities, readings, rollups)

    async def claims(self, seqs: Sequence[int]) -> list[tuple[int, int]]:
        """The sequence ranges a batch of ``seqs`` accounts for (see the module docstring)."""
        ordered = array("q", seqs)  # a column of a batch's numbers, not an object each
        if any(a > b for a, b in zip(ordered, islice(ordered, 1, None), strict=False)):
            ordered = array("q", sorted(ordered))
        if not ordered:
            return []
        first, last = ordered[0], ordered[-1]
        if last - first > 8 * len(ordered):  # scattered (the newest of every series)
            return await self._claims_each(ordered)
        # Runs of the batch with no other queued row between them claim from below the first
        # to below the next queued row above the last, in one range.
        others: list[int] = []
        for table in ("outbox", "outbox_readings", "outbox_staged", "outbox_rollups"):
            # Mostly the batch's own rows: read a chunk at a time, only the others kept.
            async for found in self._db.fetch_chunks(
                f"SELECT seq FROM {table} WHERE seq BETWEEN ? AND ?", (first, last)
            ):
                others.extend(seq for (seq,) in found if not _holds(ordered, seq))
        others.sort()
        runs: list[tuple[int, int]] = []
        start = before = first
        for seq in ordered[1:]:
            if bisect.bisect(others, before) != bisect.bisect(others, seq):
                runs.append((start, before))
                start = seq
            before = seq
        runs.append((start, before))
        ends = sorted({end for run in runs for end in run})
        inner = [(lo - 1, hi) for lo, hi in runs]
        return merge_ranges([*await self._claims_each(ends), *inner])

    async def _claims_each(self, seqs: Sequence[int]) -> list[tuple[int, int]]:
        """``(prev, next - 1]`` of every one of ``seqs``, merged."""
        ranges: list[tuple[int, int]] = []
        for chunk in _chunks(list(seqs)):
            prev = _PREV.replace("?1", "j.value")
            upto = _NEXT.replace("?1", "j.value").replace("?2", "n.given + 1")
            rows = await self._db.fetch_all(
                f"SELECT {prev}, {upto} - 1 FROM json_each(?) AS j,"
                f" (SELECT ({HIGHEST_COMMITTED}) AS given) AS n",
                (f"[{','.join(map(str, chunk))}]",),
            )
            ranges.extend((int(r[0]), int(r[1])) for r in rows)
        return merge_ranges(ranges)

    async def series(self, ids: list[int]) -> dict[int, tuple[str, str, str]]:
        """(device_id, metric, unit) of reading series."""
        found: dict[int, tuple[str, str, str]] = {}
        for chunk in _chunks(ids):
            # One statement for any number of ids: an ``IN`` list of the chunk's length was a
            # prepared statement per length in the reader's cache, up to 100 KB each.
            for row in await self._db.fetch_all(
                "SELECT id, device_id, metric, unit FROM series"
                " WHERE id IN (SELECT value FROM json_each(?))",
                (f"[{','.join(map(str, chunk))}]",),
            ):
                found[int(row[0])] = (row[1], row[2], row[3])
        return found

    async def bulk_waiting(self) -> int:
        """Readings and rollups queued (from the running totals and ranges of the readings'
        keys: no scan)."""
        stats = await self._db.fetch_one("SELECT records FROM outbox_stats WHERE id = 1")
        entities = await self._db.fetch_value("SELECT count(*) FROM outbox")
        uncounted = await self._db.fetch_value(_UNCOUNTED)
        staged = await self._db.fetch_value(_STAGED)
        return (
            int(stats[0] if stats else 0)
            + int(uncounted or 0)
            + int(staged or 0)
            - int(entities or 0)
        )

    async def release(self) -> None:
        """Nothing in flight reached the cloud (the connection failed): unmark it all, so
        compaction may fold it again. A released rollup merges into an unsent one of its
        bucket, if compaction made one meanwhile."""
        async with self._db.transaction() as conn:
            await conn.execute("DELETE FROM outbox_inflight")
            await conn.execute(_STAGE)
            await conn.execute("DELETE FROM temp.outbox_stage")
            await conn.execute(
                f"INSERT INTO temp.outbox_stage SELECT {_ROLLUP} FROM outbox_rollups"
                " WHERE inflight = 1"
            )
            deleted = await _rowcount(conn, "DELETE FROM outbox_rollups WHERE inflight = 1", ())
            await _merge_stage(conn, deleted, ROLLUP_BYTES, rolled_up=False)

    # The answer -----------------------------------------------------------------------------

    async def acknowledge(
        self, sent: Selection, acked_seq: int, rejected: int, *, ride_s: float | None = None
    ) -> None:
        """The cloud committed ``sent`` (refused records included, kept in its dead letters):
        delete exactly those rows, raise ``staged_acked`` over those staged; count, stamp, and
        note the cloud's contiguous ack.

        In short transactions of at most ``_ACK_ROWS`` rows each, so a fan command or ingest
        never waits long behind a large batch (a farm's trickle is one transaction); a crash
        between two leaves the rest in flight, sent again and applied once. The staged readings
        are acknowledged in the last one, with the answer.

        ``ride_s``: each transaction may wait that long for a commit made anyway and run
        inside it (see :meth:`Database.write`). An acknowledgement lost in a crash costs a
        resend of rows the cloud takes once by their numbers, nothing more."""
        pieces: list[tuple[str, Sequence[int], int]] = []
        for start in range(0, len(sent.entities), _ACK_ROWS):
            rows = sent.entities[start : start + _ACK_ROWS]
            pieces.append(("outbox", [r.seq for r in rows], sum(r.bytes for r in rows)))
        for table, seqs, each in (
            ("outbox_readings", sent.readings.seq, READING_BYTES),
            ("outbox_rollups", sent.rollups.seq, ROLLUP_BYTES),
        ):
            for start in range(0, len(seqs), _ACK_ROWS):
                chunk = seqs[start : start + _ACK_ROWS]
                pieces.append((table, chunk, each * len(chunk)))
        # Pieces packed into transactions of up to _ACK_ROWS rows; the last one also notes
        # the answer.
        transactions: list[list[tuple[str, Sequence[int], int]]] = [[]]
        packed = 0
        for member in pieces:
            if packed and packed + len(member[1]) > _ACK_ROWS:
                transactions.append([])
                packed = 0
            transactions[-1].append(member)
            packed += len(member[1])
        last = len(transactions) - 1
        for index, members in enumerate(transactions):

            def work(
                conn: sqlite3.Connection,
                members: list[tuple[str, Sequence[int], int]] = members,
                index: int = index,
            ) -> None:
                if index == 0:
                    conn.execute(_COUNT_IN).close()  # the totals below include what is deleted
                for table, seqs_of, size in members:
                    # One statement for the piece (a JSON array of integers: exact).
                    deleted = _changed(
                        conn,
                        f"DELETE FROM {table} WHERE seq IN (SELECT value FROM json_each(?))",
                        (f"[{','.join(map(str, seqs_of))}]",),
                    )
                    count = len(seqs_of)
                    if table == "outbox_readings":  # those sent from the stage are not here
                        count, size = deleted, deleted * READING_BYTES
                    conn.execute(
                        "UPDATE outbox_stats SET records = records - ?, bytes = bytes - ?"
                        " WHERE id = 1",
                        (count, size),
                    ).close()
                if index == last:
                    _answered(conn, sent.readings.seq, acked_seq, rejected)

            await self._db.write(work, hot=True, ride_s=ride_s)

    async def count_in(self) -> None:
        """Add the queued readings the stored totals do not include yet to them (one write:
        :meth:`figures` counts them otherwise, by a range of the readings' key)."""
        async with self._db.transaction() as conn:
            await conn.execute(_COUNT_IN)
        self.uncounted = 0

    async def figures(self) -> OutboxFigures:
        """Lag, bytes queued, age of the oldest unsent record, counts (cheap: no scans; the
        readings queued since the totals were last written, and those staged, are ranges of
        their keys)."""
        stats = await self._db.fetch_one("SELECT * FROM outbox_stats WHERE id = 1")
        assert stats is not None  # inserted by migration 0008
        self.uncounted = int(await self._db.fetch_value(_UNCOUNTED) or 0)
        uncounted = self.uncounted + int(await self._db.fetch_value(_STAGED) or 0)
        stored = await self._db.fetch_value("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")
        newest = max(int(stored or 0), self._db.sequence.given)
        # The aggregate min() skips an empty table's NULL (the two-argument min() does not).
        oldest = await self._db.fetch_value(
            "SELECT min(t) FROM ("
            " SELECT (SELECT created_at FROM outbox ORDER BY seq LIMIT 1) AS t"
            " UNION ALL SELECT (SELECT ts FROM outbox_readings ORDER BY seq LIMIT 1)"
            " UNION ALL SELECT (SELECT ts FROM outbox_staged ORDER BY seq LIMIT 1)"
            " UNION ALL SELECT (SELECT ts FROM outbox_rollups ORDER BY seq LIMIT 1))"
        )
        acked = int(stats["acked_seq"])
        records = int(stats["records"]) + uncounted
        return OutboxFigures(
            records=records,
            bytes=int(stats["bytes"]) + READING_BYTES * uncounted,
            lag=0 if records == 0 else max(0, int(newest or acked) - acked),
            oldest_unsent_ms=None if oldest is None else int(oldest),
            rolled_up=int(stats["rolled_up"]),
            rejected=int(stats["rejected"]),
            acked_seq=acked,
            last_success_ms=stats["last_success_ms"],
        )

    # Compaction -----------------------------------------------------------------------------

    async def roll_up_readings(self, max_rows: int) -> Compaction:
        """Fold up to ``max_rows`` of the oldest queued readings not in flight into 1-minute
        rollups (merged into an unsent rollup of the same series and minute), in one short
        transaction."""
        async with self._db.transaction() as conn:
            hi = await _value(
                conn,
                "SELECT max(seq) FROM (SELECT seq FROM outbox_readings AS r"
                f" WHERE {_NOT_IN_FLIGHT} ORDER BY seq LIMIT ?)",
                (max_rows,),
            )
            if hi is None:
                return Compaction(0, 0)
            await conn.execute(_COUNT_IN)  # the totals below include what is folded
            await conn.execute(_STAGE)
            await conn.execute("DELETE FROM temp.outbox_stage")
            await conn.execute(
                "INSERT INTO temp.outbox_stage SELECT min(seq), series_id, ?, ts - ts % ?,"
                " min(value), max(value), sum(value), count(*) FROM outbox_readings AS r"
                f" WHERE r.seq <= ? AND {_NOT_IN_FLIGHT} GROUP BY series_id, ts - ts % ?",
                (MINUTE_MS, MINUTE_MS, hi, MINUTE_MS),
            )
            deleted = await _rowcount(
                conn,
                f"DELETE FROM outbox_readings AS r WHERE r.seq <= ? AND {_NOT_IN_FLIGHT}",
                (hi,),
            )
            return await _merge_stage(conn, deleted, READING_BYTES)

    async def roll_up_minutes(self, max_rows: int) -> Compaction:
        """Fold up to ``max_rows`` of the oldest 1-minute rollups not in flight into 1-hour
        rollups, in one short transaction."""
        async with self._db.transaction() as conn:
            hi = await _value(
                conn,
                "SELECT max(seq) FROM (SELECT seq FROM outbox_rollups"
                " WHERE width_ms = ? AND inflight = 0 ORDER BY seq LIMIT ?)",
                (MINUTE_MS, max_rows),
            )
            if hi is None:
                return Compaction(0, 0)
            where = "seq <= ? AND width_ms = ? AND inflight = 0"
            await conn.execute(_STAGE)
            await conn.execute("DELETE FROM temp.outbox_stage")
            await conn.execute(
                "INSERT INTO temp.outbox_stage SELECT min(seq), series_id, ?, ts - ts % ?,"
                f" min(vmin), max(vmax), sum(vsum), sum(n) FROM outbox_rollups WHERE {where}"
                " GROUP BY series_id, ts - ts % ?",
                (HOUR_MS, HOUR_MS, hi, MINUTE_MS, HOUR_MS),
            )
            deleted = await _rowcount(
                conn, f"DELETE FROM outbox_rollups WHERE {where}", (hi, MINUTE_MS)
            )
            return await _merge_stage(conn, deleted, ROLLUP_BYTES)


def _mark_oldest(
    conn: sqlite3.Connection, room: int, *, floor: int = 0
) -> tuple[tuple[int, int] | None, Rollups]:
    """Mark the oldest ``room`` rows of the queued readings above ``floor`` and the rollups
    not in flight, both kinds together in sequence order (the readings as one range: every
    reading from the first to the last); the range marked, and the rollups.

    Counted across the kinds, so a batch never marks (nor reads) more rows than it holds."""
    # One ordered walk of each table's key, merged (a compound ORDER BY): no sort of a backlog.
    cut = _scalar(
        conn,
        "SELECT max(seq) FROM (SELECT r.seq FROM outbox_readings AS r"
        f" WHERE r.seq > ?1 AND {_NOT_IN_FLIGHT} UNION ALL SELECT r.seq FROM outbox_staged"
        f" AS r WHERE r.seq > ?1 AND {_NOT_IN_FLIGHT} UNION ALL SELECT seq FROM outbox_rollups"
        " WHERE inflight = 0 ORDER BY 1 LIMIT ?2)",
        (floor, room),
    )
    if cut is None:
        return None, Rollups()
    bounds = conn.execute(
        "SELECT min(seq), max(seq) FROM (SELECT r.seq FROM outbox_readings AS r"
        f" WHERE r.seq > ?1 AND r.seq <= ?2 AND {_NOT_IN_FLIGHT} UNION ALL SELECT r.seq"
        f" FROM outbox_staged AS r WHERE r.seq > ?1 AND r.seq <= ?2 AND {_NOT_IN_FLIGHT})",
        (floor, int(cut)),
    ).fetchone()
    span = None
    if bounds is not None and bounds[1] is not None:
        lo, hi = int(bounds[0]), int(bounds[1])
        conn.execute(
            "INSERT OR IGNORE INTO outbox_inflight (lo, hi) VALUES (?, ?)", (lo - 1, hi)
        ).close()
        span = (lo - 1, hi)
    # Read, then marked, in the same transaction: an UPDATE ... RETURNING would hold every
    # row it returns in SQLite's memory before the first (megabytes for a batch of rollups).
    rollups = Rollups()
    cursor = conn.execute(
        f"SELECT {_ROLLUP} FROM outbox_rollups WHERE inflight = 0 AND seq <= ? ORDER BY seq",
        (int(cut),),
    )
    try:
        while chunk := cursor.fetchmany(2_000):
            rollups.extend(chunk)
    finally:
        cursor.close()
    conn.execute(
        "UPDATE outbox_rollups SET inflight = 1 WHERE inflight = 0 AND seq <= ?", (int(cut),)
    ).close()
    return span, rollups


def _answered(conn: sqlite3.Connection, seqs: Sequence[int], acked_seq: int, rejected: int) -> None:
    """The end of an acknowledgement: the staged readings among ``seqs`` no longer queued,
    in-flight ranges that hold no queued reading any more gone, and the cloud's answer
    noted."""
    _acknowledge_staged(conn, seqs)
    conn.execute(
        "DELETE FROM outbox_inflight WHERE NOT EXISTS (SELECT 1 FROM outbox_readings"
        " AS r WHERE r.seq > outbox_inflight.lo AND r.seq <= outbox_inflight.hi)"
        " AND NOT EXISTS (SELECT 1 FROM outbox_staged AS r"
        " WHERE r.seq > outbox_inflight.lo AND r.seq <= outbox_inflight.hi)"
    ).close()
    conn.execute(
        "UPDATE outbox_stats SET acked_seq = max(acked_seq, ?),"
        " rejected = rejected + ?, last_success_ms = ? WHERE id = 1",
        (acked_seq, rejected, int(time.time() * 1000)),
    ).close()


def _acknowledge_staged(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """The cloud committed the staged readings among ``seqs``: raise ``staged_acked`` to the
    highest of them, so the stage's rows up to it are no longer queued (none is deleted).

    The uploader takes staged readings lowest numbers first and is answered batch by batch, so
    every staged reading below the highest one sent was sent with it or before it. Should one
    not have been, it is queued in ``outbox_readings`` under its number here, in the same
    transaction, so that raising the mark over it cannot lose it."""
    if not seqs:
        return
    sent = f"[{','.join(map(str, seqs))}]"
    top = _scalar(
        conn,
        "SELECT max(seq) FROM outbox_staged WHERE seq IN (SELECT value FROM json_each(?))",
        (sent,),
    )
    if top is None:
        return
    conn.execute(
        "INSERT INTO outbox_readings (seq, series_id, ts, value) SELECT seq, series_id, ts, value"
        " FROM outbox_staged WHERE seq < ?1 AND seq NOT IN (SELECT value FROM json_each(?2))"
        " ORDER BY seq",
        (int(top), sent),
    ).close()
    conn.execute("UPDATE outbox_stats SET staged_acked = ? WHERE id = 1", (int(top),)).close()


async def _merge_stage(
    conn: aiosqlite.Connection, deleted: int, each: int, *, rolled_up: bool = True
) -> Compaction:
    """Merge the staged rollups into the queue and count: ``deleted`` rows of ``each`` bytes
    were replaced (``rolled_up``: by compaction)."""
    merged = await _value(conn, _STAGED_MERGES, ())
    staged = await _value(conn, "SELECT count(*) FROM temp.outbox_stage", ())
    await conn.execute(_MERGE_STAGE)
    added = int(staged) - int(merged)
    freed = deleted * each - added * ROLLUP_BYTES
    await conn.execute(
        "UPDATE outbox_stats SET records = records - ?, bytes = bytes - ?,"
        " rolled_up = rolled_up + ? WHERE id = 1",
        (deleted - added, freed, deleted if rolled_up else 0),
    )
    return Compaction(deleted, freed)


def _scalar(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row, on the writer's thread (inside a write's work)."""
    cursor = conn.execute(sql, params)
    try:
        row = cursor.fetchone()
    finally:
        cursor.close()
    return None if row is None else row[0]


def _changed(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    """Rows changed by one statement, on the writer's thread."""
    cursor = conn.execute(sql, params)
    try:
        return int(cursor.rowcount)
    finally:
        cursor.close()


async def _value(conn: aiosqlite.Connection, sql: str, params: Sequence[Any]) -> Any:
    rows = list(await conn.execute_fetchall(sql, params))
    return rows[0][0] if rows else None


async def _rowcount(conn: aiosqlite.Connection, sql: str, params: Sequence[Any]) -> int:
    cursor = await conn.execute(sql, params)
    count = cursor.rowcount
    await cursor.close()
    return int(count)
