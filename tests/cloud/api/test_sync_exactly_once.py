"""Sync apply records what it applied by runs of sequence numbers: batches arriving out of
order, re-sent after a lost answer, or re-signed with the same records are applied once."""

from __future__ import annotations

from typing import Any

from tests.cloud.api.conftest import Cloud, Conn, World
from tests.cloud.api.test_several_processes import _paired, _post, _readings_of
from tests.support.sim_agent import SimAgent

T0 = 1_700_000_000_000


async def _hourly(system: Conn, agent: SimAgent) -> int:
    total: int = await system.fetchval(
        "SELECT coalesce(sum(count), 0) FROM reading_rollups WHERE resolution = '1h'"
        " AND device_id = ANY($1::uuid[])",
        agent.device_ids,
    )
    return total


async def test_batches_out_of_order_and_resent_are_applied_once(
    cloud: Cloud, world: World, system: Conn
) -> None:
    agent = await _paired(cloud, world)
    first = agent.reading_records(T0, 10, 10_000)  # 3 records, 30 readings
    second = agent.reading_records(T0 + 100_000, 10, 10_000)
    third = agent.reading_records(T0 + 200_000, 10, 10_000)

    async def send(records: list[Any]) -> Any:
        batch = agent.sign(records, 30)
        status, ack = await _post(cloud, batch.body, batch.headers())
        assert status == 200 and ack["rejected"] == 0
        return ack

    # The third arrives first: above the ack, remembered as a run of numbers.
    assert (await send(third))["acked_seq"] == 4
    assert await _readings_of(system, agent) == 30
    # Re-sent while still above the ack, and with the first: only the first is new.
    await send(third)
    await send(first + third)
    assert await _readings_of(system, agent) == 60
    # The gap fills; everything sent again (below the ack now) changes nothing.
    assert (await send(second))["acked_seq"] == third[-1].seq
    for records in (first, second, third, first + second + third):
        await send(records)
    assert await _readings_of(system, agent) == 90
    assert await _hourly(system, agent) == 90
