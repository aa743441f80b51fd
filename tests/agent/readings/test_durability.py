"""A kill -9 during ingest loses no committed reading and leaves a sound database."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from agent.store.db import Database
from agent.store.readings import ReadingStore
from tests.support.reading_ingester import STEP, T0

ROOT = Path(__file__).resolve().parents[3]
COMMITS_BEFORE_KILL = 25
WAIT = 30.0


async def ingest_then_kill(path: Path, *options: str) -> int:
    """Run the ingesting child, SIGKILL it mid-ingest; the highest reading it reported."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.reading_ingester",
        str(path),
        *options,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    reported = -1
    commits = 0
    try:
        while commits < COMMITS_BEFORE_KILL:
            line = await asyncio.wait_for(child.stdout.readline(), WAIT)
            assert line, f"ingester exited early with {await child.wait()}"
            if line.startswith(b"committed "):
                reported = int(line.split()[1])
                commits += 1
    finally:
        os.kill(child.pid, signal.SIGKILL)
        await child.wait()
    # Lines written before the kill are still in the pipe: they count as reported too.
    for line in (await child.stdout.read()).splitlines():
        if line.startswith(b"committed "):
            reported = int(line.split()[1])
    return reported


async def test_sigkill_during_ingest_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    for _ in range(3):
        reported = await ingest_then_kill(path)  # committed readings, all before the kill

        db = Database(path)
        await db.open()  # runs quick_check; raises if the file is damaged
        try:
            verdict = [row[0] for row in await db.fetch_all("PRAGMA integrity_check")]
            assert verdict == ["ok"]
            present = await db.fetch_value(
                "SELECT count(*) FROM readings WHERE ts <= ?", (T0 + reported * STEP,)
            )
            assert present == reported + 1, "every reported reading is on disk"
            # Rollups were committed with their raw rows, never apart from them.
            raw = await db.fetch_value("SELECT count(*) FROM readings")
            assert await db.fetch_value("SELECT sum(n) FROM readings_1m") == raw
            assert await db.fetch_value("SELECT sum(n) FROM readings_1h") == raw
        finally:
            await db.close()


async def test_sigkill_during_staging_and_folding_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path,
) -> None:
    """Batches go to the stage while folds move it into the series tables without pause: a
    kill at any moment of either keeps every reported reading, exactly once, and the next fold
    (resuming one cut short) leaves raw rows and rollups agreeing."""
    path = tmp_path / "agent.db"
    for _ in range(3):
        reported = await ingest_then_kill(path, "--staged")

        db = Database(path)
        await db.open()
        try:
            verdict = [row[0] for row in await db.fetch_all("PRAGMA integrity_check")]
            assert verdict == ["ok"]
            # Folded or staged, each reading is seen once.
            present = await db.fetch_value(
                "SELECT count(*) FROM readings_all WHERE ts <= ?", (T0 + reported * STEP,)
            )
            assert present == reported + 1, "every reported reading is on disk, once"
            store = ReadingStore(db, staged=True, fold_chunk=100)
            await store.fold()
            assert await db.fetch_value("SELECT count(*) FROM readings_stage") == 0
            raw = await db.fetch_value("SELECT count(*) FROM readings")
            assert raw == await db.fetch_value("SELECT count(*) FROM readings_all")
            assert await db.fetch_value("SELECT sum(n) FROM readings_1m") == raw
            assert await db.fetch_value("SELECT sum(n) FROM readings_1h") == raw
            # The sync outbox queued each folded reading once.
            assert await db.fetch_value("SELECT count(*) FROM outbox_readings") == raw
        finally:
            await db.close()
