"""Shared steps of the agent + cloud tests."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent.store.readings import bucket_of
from agent.sync.pairing import pair
from tests.e2e.conftest import LiveCloud

# Small pacing so a test sees sync happen quickly; never asserted on.
FAST_SYNC: dict[str, Any] = {
    "sync_interval_s": 0.05,
    "sync_heartbeat_s": 0.2,
    "sync_backoff_initial_s": 0.05,
    "sync_backoff_max_s": 0.3,
    "sync_request_timeout_s": 10.0,
}


async def eventually(check: Callable[[], Awaitable[bool]], what: str, limit_s: float = 30) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` if it never does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)


async def paired_state(cloud: LiveCloud, state_dir: Path) -> tuple[str, str]:
    """A cloud admin and owner; the agent in ``state_dir`` paired. Returns (owner id, email)."""
    await cloud.add_user("admin", "root@cloud.test")
    owner_email = "owner@cloud.test"
    owner_id = await cloud.add_user("farm_manager", owner_email)
    code = await cloud.create_agent_code(await cloud.login("root@cloud.test"), owner_id)
    await pair(cloud.url, code, state_dir)
    return owner_id, owner_email


async def add_readings(
    db_path: Path,
    device_id: str,
    start_ms: int,
    count: int,
    step_ms: int = 1000,
    value: float | None = None,
) -> None:
    """Readings of one series written straight into the agent's SQLite (as the writer would):
    ``value`` each, or a saw-tooth from 20 to 24.9.

    In a thread: the agent under test shares this event loop, and a write transaction it holds
    finishes only when the loop runs; waiting for its lock on the loop would deadlock until the
    busy timeout ("database is locked").
    """
    await asyncio.to_thread(_write_readings, db_path, device_id, start_ms, count, step_ms, value)


def _write_readings(
    db_path: Path, device_id: str, start_ms: int, count: int, step_ms: int, value: float | None
) -> None:
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT OR IGNORE INTO series (device_id, metric, unit, created_at)"
            " VALUES (?, 'temperature', 'C', '2024-01-01T00:00:00.000Z')",
            (device_id,),
        )
        (series_id,) = conn.execute(
            "SELECT id FROM series WHERE device_id = ? AND metric = 'temperature'", (device_id,)
        ).fetchone()
        conn.executemany(
            "INSERT INTO readings (bucket, series_id, ts, value) VALUES (?, ?, ?, ?)",
            [
                (
                    bucket_of(start_ms + i * step_ms),
                    series_id,
                    start_ms + i * step_ms,
                    20 + (i % 50) / 10 if value is None else value,
                )
                for i in range(count)
            ],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
