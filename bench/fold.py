"""What a fold of staged readings writes to the card, fold after fold, as history builds up.

Run: .venv/bin/python -m bench.fold [--devices 500] [--folds 6] [--minutes 30] [--interval 10]

The agent's own store (agent/store) in a fresh database: every fold stages ``--minutes`` (whole
30-minute time buckets) of ``--devices`` x 3 metrics, one message per device every
``--interval`` s (as bench/pace.py sends them), and the first minute of the next bucket; then,
as the agent does a minute after a bucket ends, folds the buckets that ended into the bucketed
tables (that minute stays staged, for the next fold) and checkpoints the WAL. Printed per fold:
bytes written per reading (``write_bytes`` and ``wchar`` of /proc/self/io, the fold and its
checkpoint), the process's CPU per reading while the fold ran (a farm pays it every half
hour, on top of what bench/pace.py measures), and which tables its WAL frames went to
(bench/walpages.py). bench/pace.py measures the commits of a farm's pace without a fold in its
window; this is the other half.
Before each fold the cloud has acknowledged every staged reading, as a connected cloud does
within seconds (the mark an acknowledgement raises is set directly, outside the measured
span); ``--cloud-away`` leaves them unacknowledged, as in an outage, so the fold also queues
each of them for the cloud.

Baseline, measured in the same run: the rows folded, appended in key order to a table of the
raw readings' shape (keyed by bucket, series and time) in a database of its own, and
checkpointed: the least a B-tree store can write for them under WAL. The ratio is what the fold
adds to it: the rollups, the stage emptied, and whatever rows land inside the tables' history.
Beside it, the same rows appended to a file under a rollback journal (``PERSIST``), where the
pages a transaction adds are written once instead of twice (WAL, then checkpoint): what a
fold into such a file would write for the raw readings (docs/measurements/pace.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.process_io import ProcessIo, process_io
from agent.store.connections import PAGE_SIZE
from agent.store.db import Database
from agent.store.readings import BUCKET_MS, NewReading, ReadingStore
from bench.measure import Run
from bench.walpages import WalTail, page_names, report
from tests.support.reading_seed import add_device, add_farm, add_user

_METRICS = ("co2", "temperature", "humidity")
_T0 = 1_780_000_000_000 // BUCKET_MS * BUCKET_MS  # a bucket's start
# The agent folds this long after a bucket ends (agent/services/ingest/reading_runtime.py).
_GRACE_MS = 60_000


def _io() -> ProcessIo:
    io = process_io()
    if io is None:
        raise SystemExit("this benchmark needs Linux's /proc/self/io")
    return io


def _per(before: ProcessIo, after: ProcessIo, count: int) -> tuple[float, float]:
    return (
        (after.write_bytes - before.write_bytes) / count,
        (after.wchar - before.wchar) / count,
    )


def _baseline(
    path: Path, rows: list[tuple[int, int, int, float]], journal: str = "WAL"
) -> tuple[float, float]:
    """The rows appended in key order to a fresh table of the readings' shape, checkpointed
    (the file is deleted after). ``journal`` is the file's journal mode: under WAL every page
    is written twice (to the WAL, then by the checkpoint); under a rollback journal
    (``PERSIST``) a page the transaction adds is written once, into the file, and only the
    pages it changes go to the journal first."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE readings (bucket INTEGER NOT NULL, series_id INTEGER NOT NULL,"
            " ts INTEGER NOT NULL, value REAL NOT NULL, raw REAL, received_ts INTEGER,"
            " device_ts INTEGER, PRIMARY KEY (bucket, series_id, ts)) WITHOUT ROWID"
        )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = _io()
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO readings (bucket, series_id, ts, value) VALUES (?, ?, ?, ?)", rows
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        figures = _per(before, _io(), len(rows))
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    return figures


@dataclass
class _Census:
    """The WAL's commits while a fold runs, read every 20 ms: SQLite checkpoints the WAL every
    4 MiB and starts it over, which would hide the frames written before."""

    tail: WalTail
    commits: list[list[int]] = field(default_factory=list)

    async def follow(self) -> None:
        while True:
            self.commits.extend(self.tail.commits())
            await asyncio.sleep(0.02)


async def _stage_span(
    store: ReadingStore, devices: list[str], start_ms: int, end_ms: int, args: argparse.Namespace
) -> list[tuple[int, int, int, float]]:
    """Stage the readings of ``[start_ms, end_ms)``, a message per device per interval, spread
    evenly; their (bucket, series, ts, value)."""
    rng = random.Random(start_ms)
    interval_ms = int(args.interval * 1000)
    staged: list[tuple[int, int, int, float]] = []
    for step_ms in range(start_ms, end_ms, interval_ms):
        batch = []
        for index, device in enumerate(devices):
            ts = step_ms + index * interval_ms // len(devices)
            for metric in _METRICS:
                value = round(rng.uniform(15, 30), 2)
                batch.append(NewReading(device, metric, "", ts, value))
                series = index * len(_METRICS) + _METRICS.index(metric)
                staged.append((ts // BUCKET_MS, series, ts, value))
        await store.write(batch)
    return staged


def _acknowledged(conn: sqlite3.Connection) -> None:
    """The cloud holds every staged reading (agent/sync/outbox.py raises this mark)."""
    conn.execute(
        "UPDATE outbox_stats SET staged_acked = (SELECT coalesce(max(seq), 0) FROM readings_stage)"
    )


async def _run(args: argparse.Namespace, tmp: Path, run: Run) -> None:
    path = tmp / "agent.db"
    db = Database(path)
    await db.open()
    try:
        farm = await add_farm(db, await add_user(db))
        devices = [await add_device(db, farm) for _ in range(args.devices)]
        now = [_T0]
        store = ReadingStore(db, staged=True, now=lambda: now[0])
        span_ms = int(args.minutes * 60_000)
        if span_ms <= 0 or span_ms % BUCKET_MS:
            raise SystemExit("--minutes must be a whole number of 30-minute buckets")
        print(f"{args.devices} devices x {len(_METRICS)} metrics every {args.interval:g} s,"
              f" a fold every {args.minutes:g} min; page size {PAGE_SIZE} B")  # fmt: skip
        pending: list[tuple[int, int, int, float]] = []
        staged_to = _T0
        for fold in range(args.folds):
            ended = _T0 + (fold + 1) * span_ms
            now[0] = ended + _GRACE_MS
            pending += await _stage_span(store, devices, staged_to, now[0], args)
            staged_to = now[0]
            rows = [row for row in pending if row[2] < ended]
            pending = [row for row in pending if row[2] >= ended]
            if not args.cloud_away:
                await db.write(_acknowledged)
            await db.checkpoint()
            census = _Census(WalTail(Path(f"{path}-wal")))
            before = _io()
            cpu0 = time.process_time()
            following = asyncio.create_task(census.follow())
            folded = await store.fold()
            following.cancel()
            cpu = time.process_time() - cpu0
            census.commits.extend(census.tail.commits())  # before the checkpoint truncates it
            await db.checkpoint()
            written, handed = _per(before, _io(), max(folded, 1))
            base_written, base_handed = _baseline(tmp / f"baseline-{fold}.db", sorted(rows))
            once_written, _ = _baseline(tmp / f"once-{fold}.db", sorted(rows), "PERSIST")
            if folded != len(rows):
                run.failures.add("reading not folded", abs(len(rows) - folded))
            print(f"fold {fold + 1}: {folded:,} readings; written per reading {written:.0f} B"
                  f" write_bytes, {handed:.0f} B wchar; baseline (the rows appended in key order)"
                  f" {base_written:.0f} B, {base_handed:.0f} B;"
                  f" ratio {written / max(base_written, 1):.2f}x write_bytes;"
                  f" CPU {cpu * 1e6 / max(folded, 1):.1f} us per reading;"
                  f" the rows in a rollback-journal file {once_written:.0f} B")  # fmt: skip
            if args.census:
                for line in report(census.commits, page_names(path), 1.0)[1:12]:
                    print("   ", line)
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--folds", type=int, default=6)
    parser.add_argument("--minutes", type=float, default=30.0, help="staged between two folds")
    parser.add_argument(
        "--interval", type=float, default=10.0, help="s between a device's messages"
    )
    parser.add_argument("--census", action="store_true", help="print each fold's WAL frames")
    parser.add_argument(
        "--cloud-away", action="store_true", help="nothing acknowledged: an outage's folds"
    )
    args = parser.parse_args()
    with Run().reported() as run, tempfile.TemporaryDirectory(prefix="bench-fold-") as tmp:
        asyncio.run(_run(args, Path(tmp), run))


if __name__ == "__main__":
    main()
