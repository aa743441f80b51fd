"""Batches past CLOUD_SYNC_APPLY_CONCURRENCY wait for a turn in the process, and every one of
them is applied: sixteen batches at once on two cores applied fewer readings a second than two
at a time, and held every other request of the process behind them (docs/adr/0035)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tests.cloud.api.conftest import Cloud, Conn, World
from tests.cloud.api.test_several_processes import _paired, _post, _readings_of
from tests.cloud.conftest import CloudDatabase, connected

T0 = 1_700_000_000_000


async def test_a_batch_past_the_apply_concurrency_waits_its_turn_then_is_applied(
    make_cloud: Callable[..., Awaitable[Cloud]],
    world: World,
    system: Conn,
    cloud_db: CloudDatabase,
) -> None:
    cloud = await make_cloud(sync_apply_concurrency=1)
    first, second = await _paired(cloud, world), await _paired(cloud, world)
    batches = [a.sign(a.reading_records(T0, 10, 10_000), readings=30) for a in (first, second)]
    # (Watched from `system`, outside the locking transaction: a transaction sees one snapshot
    # of pg_stat_activity.)
    async with connected(cloud_db.system_dsn) as locker, locker.transaction():
        # The first agent's row locked here: its batch takes the one turn and waits inside.
        await locker.execute("SELECT 1 FROM agents WHERE id = $1 FOR UPDATE", first.agent_id)
        held = asyncio.create_task(_post(cloud, batches[0].body, batches[0].headers()))
        while not await system.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%FROM agents%'"
        ):
            assert not held.done()
            await asyncio.sleep(0.05)
        waiting = asyncio.create_task(_post(cloud, batches[1].body, batches[1].headers()))
        # Another agent's batch, which no lock holds, still waits for the turn.
        await asyncio.sleep(0.5)
        assert not waiting.done()
        assert await _readings_of(system, second) == 0
    for answer in await asyncio.gather(held, waiting):
        status, ack = answer
        assert status == 200 and ack["rejected"] == 0
    assert await _readings_of(system, first) == 30
    assert await _readings_of(system, second) == 30
