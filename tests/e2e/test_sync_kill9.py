"""An agent killed with SIGKILL in the middle of an upload loses and doubles nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from agent.store.db import Database
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import add_readings, eventually, paired_state
from tests.e2e.processes import free_port
from tests.support.reading_seed import add_device

TOTAL = 60_000


def _start_agent(
    state: Path, log: Path, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """The agent as a process (``extra``: more of its environment)."""
    with log.open("ab") as out:
        return _spawn(state, out.fileno(), extra or {})


def _spawn(state: Path, out: int, extra: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "FARM_ADMIN_EMAIL": "admin@farm.test",
        "FARM_ADMIN_PASSWORD": "correct horse battery staple",
        "FARM_MQTT_ENABLED": "false",
        # Small batches: the kill lands between two of many uploads.
        "FARM_SYNC_BATCH_MAX_RECORDS": "1000",
        "FARM_SYNC_INTERVAL_S": "0.05",
        "FARM_SYNC_BACKOFF_INITIAL_S": "0.05",
        "FARM_SYNC_BACKOFF_MAX_S": "0.3",
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--state-dir", str(state), "--host", "127.0.0.1",
         "--port", str(free_port())],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )  # fmt: skip


async def test_agent_killed_mid_upload_resumes_without_loss_or_duplicates(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    db = Database(state / "agent.db")
    await db.open()
    farm_id = str(uuid.uuid4())
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO farms (id, name, status, created_at, updated_at)"
            " VALUES (?, 'Kill site', 'active', '2024-01-01T00:00:00.000Z',"
            " '2024-01-01T00:00:00.000Z')",
            (farm_id,),
        )
    device_id = await add_device(db, farm_id)
    await db.close()
    await add_readings(state / "agent.db", device_id, 1_700_000_000_000, TOTAL)

    async def cloud_count() -> int:
        return int((await cloud.sql("SELECT count(*) FROM readings"))[0][0])

    log = tmp_path / "agent.log"
    agent = _start_agent(state, log)
    try:

        async def uploading() -> bool:
            return await cloud_count() > 0

        await eventually(uploading, "first batches applied", limit_s=60)
        agent.send_signal(signal.SIGKILL)
        agent.wait(30)
        assert await cloud_count() < TOTAL, "the kill came too late to test anything"
        agent = _start_agent(state, log)

        async def complete() -> bool:
            return await cloud_count() == TOTAL

        await eventually(complete, f"all {TOTAL} readings after restart ({log})", limit_s=60)
    finally:
        agent.kill()
        agent.wait(30)
    rows = await cloud.sql("SELECT count(*), count(DISTINCT ts) FROM readings")
    assert tuple(rows[0]) == (TOTAL, TOTAL)
    await asyncio.sleep(0)
