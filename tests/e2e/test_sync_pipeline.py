"""The uploader prepares the next batch while one waits for the cloud (agent/sync/uploader.py):
an agent killed with SIGKILL at that moment, and the cloud applying the batch after the agent is
gone, still end exact in the cloud: every reading once."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import asyncpg

from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import eventually, paired_state
from tests.e2e.test_sync_kill9 import _start_agent
from tests.e2e.test_sync_outage import T0, _assert_exact, _mirrored, _seed_farm, _write

BATCH = 1000
TOTAL = 5 * BATCH
ENV = {
    "FARM_SYNC_BATCH_MAX_RECORDS": str(BATCH),
    # No heartbeat batch of its own may be the one the held cloud keeps waiting.
    "FARM_SYNC_HEARTBEAT_S": "300",
}


def _queued_in_flight(db_path: Path) -> int:
    """Queued readings the agent has marked in flight (taken for a batch, answer not seen),
    staged or queued by a fold."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        (count,) = conn.execute(
            "SELECT count(*) FROM outbox_inflight AS i JOIN (SELECT seq FROM outbox_readings"
            " UNION ALL SELECT seq FROM outbox_staged) AS r ON r.seq > i.lo AND r.seq <= i.hi"
        ).fetchone()
    finally:
        conn.close()
    return int(count)


def _queued(db_path: Path, *tables: str) -> int:
    """Rows of ``tables``: by default the queued readings, staged or queued by a fold."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return sum(
            int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in tables or ("outbox_readings", "outbox_staged")
        )
    finally:
        conn.close()


async def _cloud_readings(cloud: LiveCloud) -> tuple[int, int]:
    rows = await cloud.sql("SELECT count(*), count(DISTINCT ts) FROM readings")
    return int(rows[0][0]), int(rows[0][1])


async def test_kill_9_with_one_batch_at_the_cloud_and_the_next_prepared_ends_exact(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    device_id = await _seed_farm(state)
    db_path = state / "agent.db"
    log = tmp_path / "agent.log"
    agent = _start_agent(state, log, ENV)
    hold = await asyncpg.connect(cloud.db.superuser_dsn, timeout=10)
    try:
        await _mirrored(cloud, device_id)

        async def idle() -> bool:
            # Nothing of the set-up left to send: the next batch is the readings'.
            return await asyncio.to_thread(_queued, db_path, "outbox") == 0

        await eventually(idle, "the farm and device sent")
        agent_id = (await cloud.sql("SELECT id FROM agents"))[0][0]
        # The cloud's apply locks the agent's row first: holding it keeps the next batch (N)
        # at the cloud, unanswered, for as long as the test likes.
        held = hold.transaction()
        await held.start()
        await hold.execute("SELECT 1 FROM agents WHERE id = $1 FOR UPDATE", agent_id)
        await _write(db_path, device_id, [T0 + i * 1000 for i in range(TOTAL)])

        async def next_prepared() -> bool:
            # N's rows and N+1's are both marked in flight.
            return await asyncio.to_thread(_queued_in_flight, db_path) >= 2 * BATCH

        await eventually(next_prepared, f"batch N+1 prepared while N is at the cloud ({log})")
        agent.kill()
        agent.wait(30)
        assert await _cloud_readings(cloud) == (0, 0), "N must still be waiting at the cloud"
        await held.commit()

        async def n_applied() -> bool:
            # The cloud applies N after its sender is gone: the agent never saw the answer.
            return (await _cloud_readings(cloud))[0] > 0

        await eventually(n_applied, "batch N applied by the cloud after the kill")
        assert await _cloud_readings(cloud) == (BATCH, BATCH)
        agent = _start_agent(state, log, ENV)

        async def complete() -> bool:
            return (await _cloud_readings(cloud))[0] >= TOTAL

        await eventually(complete, f"all {TOTAL} readings after the restart ({log})", 60)

        async def trimmed() -> bool:
            # The agent saw the acks: nothing of the readings is left to send.
            return await asyncio.to_thread(_queued, db_path) == 0

        await eventually(trimmed, "the agent's outbox emptied")
    finally:
        agent.kill()
        agent.wait(30)
        await hold.close(timeout=10)
    assert await _cloud_readings(cloud) == (TOTAL, TOTAL)
    await _assert_exact(cloud, db_path)
