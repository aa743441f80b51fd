"""Sync apply records what it applied by runs of sequence numbers: batches arriving out of
order, re-sent after a lost answer, or re-signed with the same records are applied once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from protocol.sync import decode_readings
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
    # Each reading is stored as sent: its sensor, time and value.
    sent = set()
    for record in first + second + third:
        block = decode_readings(record.data)
        for ts, value in zip(block.timestamps_ms, block.values, strict=True):
            sent.add((block.device_id, ts, value))
    stored = await system.fetch(
        "SELECT device_id::text, (extract(epoch FROM ts) * 1000)::bigint AS ts, value"
        " FROM readings WHERE agent_id = $1::uuid",
        agent.agent_id,
    )
    assert {(r["device_id"], r["ts"], r["value"]) for r in stored} == sent


async def test_a_reading_sent_twice_in_one_batch_is_stored_and_rolled_up_once(
    cloud: Cloud, world: World, system: Conn
) -> None:
    agent = await _paired(cloud, world)
    # Two blocks per sensor (three sensors) sharing five times: 60 readings, 45 keys.
    records = agent.reading_records(T0, 10, 10_000) + agent.reading_records(T0 + 50_000, 10, 10_000)
    batch = agent.sign(records, 60)
    status, ack = await _post(cloud, batch.body, batch.headers())
    assert status == 200 and ack["rejected"] == 0
    assert await _readings_of(system, agent) == 45
    for resolution, width in (("1m", timedelta(minutes=1)), ("1h", timedelta(hours=1))):
        mismatched = await system.fetch(
            "WITH raw AS ("
            "  SELECT device_id, metric, date_bin($2::interval, ts, TIMESTAMPTZ '2000-01-01')"
            "    AS bucket, min(value) AS min, max(value) AS max, sum(value) AS total,"
            "    count(*) AS count"
            "  FROM readings WHERE device_id = ANY($1::uuid[]) GROUP BY 1, 2, 3)"
            " SELECT * FROM raw FULL JOIN (SELECT device_id, metric, bucket, min, max, total, count"
            "   FROM reading_rollups WHERE resolution = $3 AND device_id = ANY($1::uuid[])) AS r"
            "   USING (device_id, metric, bucket)"
            " WHERE raw.count IS DISTINCT FROM r.count OR raw.min IS DISTINCT FROM r.min"
            # Sums of floats may differ in the last place with the order they were added in.
            "   OR raw.max IS DISTINCT FROM r.max OR abs(raw.total - r.total) > 1e-9",
            agent.device_ids,
            width,
            resolution,
        )
        assert mismatched == [], resolution
