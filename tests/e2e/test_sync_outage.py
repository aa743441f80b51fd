"""Long outages (docs/design.md 8): whatever the cloud refuses, whatever compaction folds, and
whatever is killed on the way, every reading reaches the cloud exactly once, counted per
device-minute (raw readings plus the rollups that stand for the rest)."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import aiohttp

from agent.store.db import Database
from agent.store.readings import bucket_of
from agent.sync.link import CloudLink, sync_key_path
from agent.web.keys import DATABASE
from protocol.keyfile import load_or_create_private_key
from protocol.sync import (
    AGENT_HEADER,
    ROLLUP_BLOCK,
    SIGNATURE_HEADER,
    Ack,
    Batch,
    Lane,
    ReadingBlock,
    Record,
    RollupBlock,
    encode_batch,
    encode_readings,
    encode_rollups,
)
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state
from tests.e2e.test_sync_kill9 import _start_agent
from tests.support.reading_seed import add_device

T0 = 1_700_000_040_000 - 1_700_000_040_000 % 3_600_000


async def _farm_with_device(agent: Agent) -> tuple[str, str]:
    resp = await agent.client.post(
        "/api/v1/farms/", json={"name": "Outage site"}, headers=agent.auth()
    )
    assert resp.status == 201, await resp.text()
    farm_id = (await resp.json())["id"]
    return farm_id, await add_device(agent.client.app[DATABASE], farm_id)


async def _mirrored(cloud: LiveCloud, device_id: str) -> None:
    async def there() -> bool:
        rows = await cloud.sql("SELECT count(*) FROM devices WHERE id = $1", UUID(device_id))
        return int(rows[0][0]) == 1

    await eventually(there, "device mirrored in the cloud")


async def _write(db_path: Path, device_id: str, stamps: list[int], metric: str = "ph") -> None:
    """Readings written straight into the agent's SQLite, as the reading writer would, with
    values that do not compress away."""
    await asyncio.to_thread(_write_sync, db_path, device_id, stamps, metric)


def _write_sync(db_path: Path, device_id: str, stamps: list[int], metric: str) -> None:
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT OR IGNORE INTO series (device_id, metric, unit, created_at)"
            " VALUES (?, ?, '', '2024-01-01T00:00:00.000Z')",
            (device_id, metric),
        )
        (series_id,) = conn.execute(
            "SELECT id FROM series WHERE device_id = ? AND metric = ?", (device_id, metric)
        ).fetchone()
        rng = random.Random(stamps[0])
        conn.executemany(
            "INSERT INTO readings (bucket, series_id, ts, value) VALUES (?, ?, ?, ?)",
            [(bucket_of(ts), series_id, ts, round(rng.uniform(0, 14), 3)) for ts in stamps],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _agent_minutes(db_path: Path) -> dict[tuple[str, int], int]:
    """Readings per device-minute as the agent stored them (the truth)."""
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        rows = conn.execute(
            "SELECT s.device_id, r.ts - r.ts % 60000, count(*) FROM readings AS r"
            " JOIN series AS s ON s.id = r.series_id GROUP BY 1, 2"
        ).fetchall()
    finally:
        conn.close()
    return {(str(d), int(m)): int(n) for d, m, n in rows}


async def _cloud_minutes(cloud: LiveCloud) -> dict[tuple[str, int], int]:
    """Readings per device-minute in the cloud: raw readings plus 1-minute rollup counts."""
    rows = await cloud.sql(
        "SELECT device_id::text, m, sum(n)::bigint FROM ("
        " SELECT device_id, (floor(extract(epoch FROM ts) / 60) * 60000)::bigint AS m,"
        "  count(*) AS n FROM readings GROUP BY 1, 2"
        " UNION ALL SELECT device_id, (extract(epoch FROM bucket) * 1000)::bigint, count"
        "  FROM rollups WHERE resolution = '1m') AS parts GROUP BY 1, 2"
    )
    return {(str(r[0]), int(r[1])): int(r[2]) for r in rows}


async def _assert_exact(cloud: LiveCloud, db_path: Path) -> None:
    """Every device-minute the agent holds is in the cloud with the same count: none missing,
    none doubled."""
    expected = _agent_minutes(db_path)
    hours = await cloud.sql("SELECT count(*) FROM rollups WHERE resolution = '1h'")
    assert hours[0][0] == 0, "sized so that minutes suffice: compare per device-minute"
    found = await _cloud_minutes(cloud)
    missing = {k: n - found.get(k, 0) for k, n in expected.items() if found.get(k, 0) < n}
    doubled = {k: found[k] - n for k, n in expected.items() if found.get(k, 0) > n}
    assert (missing, doubled) == ({}, {})
    assert set(found) == set(expected)


async def _drained(cloud: LiveCloud, db_path: Path) -> bool:
    expected = sum(_agent_minutes(db_path).values())
    return sum((await _cloud_minutes(cloud)).values()) >= expected


async def _healthz(agent: Agent) -> dict[str, str]:
    checks: dict[str, str] = (await (await agent.client.get("/healthz")).json())["checks"]
    return checks


async def _paired_device(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path, **settings: Any
) -> tuple[Path, Agent, str, str]:
    """A paired agent (fast sync, ``settings`` on top) with a farm and a device the cloud holds:
    its state directory, the agent, the farm's id and the device's id."""
    state = tmp_path / "state"
    await paired_state(cloud, state)
    agent: Agent = await make_agent(**FAST_SYNC, **settings)
    farm_id, device_id = await _farm_with_device(agent)
    await _mirrored(cloud, device_id)
    return state, agent, farm_id, device_id


async def _post(cloud: LiveCloud, state: Path, records: list[Record]) -> tuple[int, Any]:
    link = CloudLink.load(state)
    assert link is not None
    batch = Batch(agent_id=link.agent_id, sent_at=int(time.time() * 1000), records=tuple(records))
    body, signature = encode_batch(batch, load_or_create_private_key(sync_key_path(state)))
    headers = {AGENT_HEADER: link.agent_id, SIGNATURE_HEADER: signature}
    async with (
        aiohttp.ClientSession() as session,
        session.post(cloud.url + "/api/v1/sync/batches", data=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json()


def _rollup(seq: int, device_id: str, n: int, total: float) -> Record:
    return Record(
        seq=seq,
        lane=Lane.BULK,
        kind="readings_1m",
        op="upsert",
        key=f"{device_id}/ph/{T0}",
        data={"device_id": device_id, "metric": "ph", "unit": "", "ts": T0,
              "min": 1.0, "max": 9.0, "sum": total, "n": n},
    )  # fmt: skip


async def test_two_rollups_of_one_minute_in_one_batch_end_exact_in_the_cloud(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    """The cloud alone: an agent that sends two rollups of the same minute in one batch (two
    compactions cut through the minute) gets both counted, once each."""
    state, _, _, device_id = await _paired_device(cloud, make_agent, tmp_path)
    high = 1 << 40  # far above the agent's own numbers
    status, ack = await _post(
        cloud,
        state,
        [_rollup(high + 1, device_id, 30, 150.0), _rollup(high + 2, device_id, 30, 300.0)],
    )
    assert status == 200, ack
    assert Ack.model_validate(ack).rejected == 0
    rows = await cloud.sql("SELECT count, mean, min, max FROM rollups WHERE device_id = $1",
                           UUID(device_id))  # fmt: skip
    assert [tuple(r) for r in rows] == [(60, 7.5, 1.0, 9.0)]


async def test_a_rollup_whose_computed_mean_rounds_past_its_max_still_lands(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    """Three readings of 0.1 sum to 0.30000000000000004 in floating point, so their mean comes
    out a hair above their max: the cloud keeps the rollup (mean held to [min, max]) instead of
    refusing it, on insert and on merge alike."""
    state, _, _, device_id = await _paired_device(cloud, make_agent, tmp_path)
    total = 0.1 + 0.1 + 0.1
    assert total / 3 > 0.1  # the case itself

    def tenths(seq: int) -> Record:
        data = {"device_id": device_id, "metric": "ph", "unit": "", "ts": T0,
                "min": 0.1, "max": 0.1, "sum": total, "n": 3}  # fmt: skip
        return Record(seq=seq, lane=Lane.BULK, kind="readings_1m", op="upsert",
                      key=f"{device_id}/ph/{T0}", data=data)  # fmt: skip

    high = 1 << 40
    for seq in (high + 1, high + 2):  # the first inserts the minute, the second merges into it
        status, ack = await _post(cloud, state, [tenths(seq)])
        assert status == 200, ack
        assert Ack.model_validate(ack).rejected == 0 and not Ack.model_validate(ack).refused
    rows = await cloud.sql("SELECT count, mean, min, max FROM rollups WHERE device_id = $1",
                           UUID(device_id))  # fmt: skip
    assert [tuple(r) for r in rows] == [(6, 0.1, 0.1, 0.1)]


async def test_a_rollup_the_database_refuses_is_refused_alone_and_the_rest_lands(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    """One rollup of a batch breaks the table's rule (its min above its max): the cloud refuses
    that record only; the batch's other rollups are stored."""
    state, _, _, device_id = await _paired_device(cloud, make_agent, tmp_path)
    high = 1 << 40
    broken = _rollup(high + 1, device_id, 30, 150.0)
    broken = broken.model_copy(update={"data": {**broken.data, "min": 9.5, "max": 1.0}})
    later = _rollup(high + 2, device_id, 30, 150.0)
    later = later.model_copy(update={"key": f"{device_id}/ph/{T0 + 60_000}",
                                     "data": {**later.data, "ts": T0 + 60_000}})  # fmt: skip
    status, body = await _post(cloud, state, [broken, later])
    assert status == 200, body
    ack = Ack.model_validate(body)
    assert ack.rejected == 1 and [r.seq for r in ack.refused] == [high + 1]
    rows = await cloud.sql("SELECT count, mean FROM rollups WHERE device_id = $1",
                           UUID(device_id))  # fmt: skip
    assert [tuple(r) for r in rows] == [(30, 5.0)]


def _rollup_block(device_id: str, seqs: list[int], n: int, total: float) -> Record:
    block = RollupBlock(device_id, "ph", "", "1m", seqs, [T0] * len(seqs), [1.0] * len(seqs),
                        [9.0] * len(seqs), [total] * len(seqs), [n] * len(seqs))  # fmt: skip
    return Record(seq=max(seqs), lane=Lane.BULK, kind=ROLLUP_BLOCK, op="upsert",
                  key=f"{device_id}/ph/1m", data=encode_rollups(block))  # fmt: skip


async def test_a_rollup_block_sent_again_in_another_grouping_counts_each_rollup_once(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    """Rollups of one minute in one block are summed; after a lost answer the agent may send
    them again grouped otherwise: each rollup still counts once."""
    state, _, _, device_id = await _paired_device(cloud, make_agent, tmp_path)
    high = 1 << 40
    status, _ = await _post(cloud, state, [_rollup_block(device_id, [high + 1, high + 2], 30, 150)])
    assert status == 200
    status, ack = await _post(
        cloud, state, [_rollup_block(device_id, [high + 2, high + 3], 30, 150)]
    )
    assert status == 200 and ack["rejected"] == 0
    rows = await cloud.sql("SELECT count, mean FROM rollups WHERE device_id = $1", UUID(device_id))
    assert [tuple(r) for r in rows] == [(90, 5.0)]


async def _strangers_device(cloud: LiveCloud) -> str:
    """A device the cloud holds on a farm that is no agent's."""
    farm = await cloud.sql("INSERT INTO farms (name) VALUES ('Elsewhere') RETURNING id")
    device = await cloud.sql(
        "INSERT INTO devices (farm_id, name, kind, device_type) VALUES ($1, 'x', 'sensor', 't')"
        " RETURNING id",
        farm[0][0],
    )
    return str(device[0][0])


async def test_readings_of_a_device_the_cloud_does_not_hold_yet_wait_for_it(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    """Readings that reach the cloud before their device's record (issue 30) are held, not
    refused, and land with the record."""
    state, _, farm_id, _ = await _paired_device(cloud, make_agent, tmp_path)
    high = 1 << 40
    later = str(uuid.uuid4())
    block = encode_readings(ReadingBlock(later, "probe", [T0, T0 + 1000], [1.5, 2.5]))
    rollup = _rollup(high + 2, later, 3, 6.0)
    records = [
        Record(seq=high + 1, lane=Lane.BULK, kind="readings", op="upsert", key="a", data=block),
        rollup,
    ]
    status, answer = await _post(cloud, state, records)
    assert status == 200, answer
    assert Ack.model_validate(answer).rejected == 0
    assert (await cloud.sql("SELECT count(*) FROM readings WHERE device_id = $1", UUID(later))) == [
        (0,)
    ]
    stamp = "2024-01-01T00:00:00.000Z"
    device = {"id": later, "farm_id": farm_id, "name": "Late", "kind": "sensor",
              "device_type": "ph_sensor", "created_at": stamp, "updated_at": stamp}  # fmt: skip
    record = Record(seq=high + 3, lane=Lane.PRIORITY, kind="devices", op="upsert", key=later,
                    data=device)  # fmt: skip
    status, answer = await _post(cloud, state, [record])
    assert status == 200 and Ack.model_validate(answer).rejected == 0, answer
    landed = await cloud.sql("SELECT count(*) FROM readings WHERE device_id = $1", UUID(later))
    assert landed[0][0] == 2
    rollups = await cloud.sql("SELECT count FROM rollups WHERE device_id = $1", UUID(later))
    assert [r[0] for r in rollups] == [3]
    assert (await cloud.sql("SELECT count(*) FROM sync_held_blocks"))[0][0] == 0
    assert (await cloud.sql("SELECT count(*) FROM sync_dead_letters"))[0][0] == 0


async def test_a_record_the_cloud_cannot_apply_is_refused_alone_and_the_rest_lands(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    state, _, _, device_id = await _paired_device(cloud, make_agent, tmp_path)
    high = 1 << 40
    good = encode_readings(ReadingBlock(device_id, "probe", [T0, T0 + 1000], [1.5, 2.5]))
    stranger = encode_readings(ReadingBlock(await _strangers_device(cloud), "probe", [T0], [1.0]))
    records = [
        Record(seq=high + 1, lane=Lane.BULK, kind="readings", op="upsert", key="a", data=good),
        Record(seq=high + 2, lane=Lane.BULK, kind="readings", op="upsert", key="b", data=stranger),
        Record(seq=high + 3, lane=Lane.PRIORITY, kind="bogus", op="upsert", key="c", data={}),
        _rollup(high + 4, device_id, 0, 0.0),
        _rollup(high + 5, device_id, 2, 4.0),
    ]
    status, answer = await _post(cloud, state, records)
    assert status == 200, answer
    ack = Ack.model_validate(answer)
    assert ack.rejected == 3
    assert sorted(r.seq - high for r in ack.refused) == [2, 3, 4]
    assert all(r.reason for r in ack.refused)
    landed = await cloud.sql(
        "SELECT count(*) FROM readings WHERE device_id = $1 AND metric = 'probe'", UUID(device_id)
    )
    assert landed[0][0] == 2
    rollups = await cloud.sql("SELECT count FROM rollups WHERE device_id = $1", UUID(device_id))
    assert [r[0] for r in rollups] == [2]
    letters = await cloud.sql("SELECT seq, kind, reason FROM sync_dead_letters ORDER BY seq")
    assert [(r[0] - high, r[1]) for r in letters] == [(2, "readings"), (3, "bogus"),
                                                      (4, "readings_1m")]  # fmt: skip
    counted = await cloud.sql("SELECT refused_records FROM agents")
    assert counted[0][0] == 3
    # An operator reads them (admins only).
    link = CloudLink.load(state)
    assert link is not None
    path = f"{cloud.url}/api/v1/agents/{link.agent_id}/dead-letters"
    owner = await cloud.login("owner@cloud.test")
    admin = await cloud.login("root@cloud.test")
    async with aiohttp.ClientSession() as session:
        async with session.get(path, headers={"Authorization": f"Bearer {owner}"}) as resp:
            assert resp.status == 403
        async with session.get(path, headers={"Authorization": f"Bearer {admin}"}) as resp:
            assert resp.status == 200, await resp.text()
            listed = await resp.json()
        async with session.get(
            f"{cloud.url}/api/v1/agents", headers={"Authorization": f"Bearer {admin}"}
        ) as resp:
            assert (await resp.json())["agents"][0]["refused_records"] == 3
    assert listed["total"] == 3
    by_seq = sorted(listed["dead_letters"], key=lambda d: d["seq"])
    assert [d["kind"] for d in by_seq] == ["readings", "bogus", "readings_1m"]
    assert "not on one of the agent's farms" in by_seq[0]["reason"]


async def test_a_batch_over_the_clouds_limit_is_split_and_lands(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await cloud.stop()
    cloud.settings = cloud.settings.model_copy(update={"max_body_bytes": 2048})
    await cloud.start()
    state = tmp_path / "state"
    await paired_state(cloud, state)
    # The agent starts by believing a much larger body will do.
    agent: Agent = await make_agent(**FAST_SYNC, sync_batch_max_body_bytes=1024 * 1024)
    _, device_id = await _farm_with_device(agent)
    await _write(state / "agent.db", device_id, [T0 + i * 1000 for i in range(3000)])
    await eventually(lambda: _drained(cloud, state / "agent.db"), "every reading in the cloud")
    await _assert_exact(cloud, state / "agent.db")


async def test_the_outbox_cap_holds_while_readings_keep_arriving(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    cap = 20_000
    state, agent, _, device_id = await _paired_device(
        cloud, make_agent, tmp_path, outbox_max_bytes=cap
    )
    await cloud.stop()
    for chunk in range(8):
        start = T0 + chunk * 600_000
        await _write(state / "agent.db", device_id, [start + i * 1000 for i in range(600)])

        async def within_cap() -> bool:
            return int((await _healthz(agent))["sync_bytes_queued"]) <= cap

        await eventually(within_cap, f"outbox back under its cap after chunk {chunk}")
    await cloud.start()
    await eventually(lambda: _drained(cloud, state / "agent.db"), "every reading in the cloud")
    await _assert_exact(cloud, state / "agent.db")


async def test_compaction_between_out_of_order_priority_sends_keeps_the_ack_advancing(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    state, agent, farm_id, device_id = await _paired_device(
        cloud, make_agent, tmp_path, outbox_max_bytes=8_000, sync_batch_max_records=50
    )
    await cloud.stop()
    await _write(state / "agent.db", device_id, [T0 + i * 1000 for i in range(900)])
    # Priority records land between bulk readings: each is sent before the readings below it,
    # and compaction folds those readings afterwards.
    for k, name in enumerate(("Renamed once", "Renamed twice")):
        resp = await agent.client.put(
            f"/api/v1/farms/{farm_id}", json={"name": name}, headers=agent.auth()
        )
        assert resp.status == 200
        start = T0 + 900_000 + k * 300_000
        await _write(state / "agent.db", device_id, [start + i * 1000 for i in range(300)])
    await cloud.start()
    newest = int(
        await agent.client.app[DATABASE].fetch_value(
            "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'"
        )
    )

    async def acked_to_the_newest() -> bool:
        rows = await cloud.sql("SELECT acked_seq FROM agents")
        return int(rows[0][0]) >= newest

    await eventually(acked_to_the_newest, "the cloud's contiguous ack reaches the newest number")
    await _assert_exact(cloud, state / "agent.db")
    assert (await cloud.sql("SELECT name FROM farms"))[0][0] == "Renamed twice"
    assert (await _healthz(agent))["sync_lag_seq"] == "0"


async def test_a_stuck_sync_shows_in_healthz_and_raises_an_alert(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    state, agent, farm_id, device_id = await _paired_device(cloud, make_agent, tmp_path)
    # The cloud starts refusing every batch (here: the agent was revoked by mistake).
    await cloud.sql("UPDATE agents SET revoked_at = now()")
    await _write(state / "agent.db", device_id, [T0])

    async def stuck() -> bool:
        checks = await _healthz(agent)
        return checks["cloud"] == "stuck" and "401" in checks["sync_last_error"]

    await eventually(stuck, "healthz says the sync is stuck")
    assert (await _healthz(agent))["sync_stuck_since"].endswith("Z")
    connectivity = await (await agent.client.get("/supabase-items")).json()
    assert connectivity["status"].startswith("stuck since ")

    async def alerted() -> bool:
        rows = await agent.client.app[DATABASE].fetch_all(
            "SELECT farm_id, severity FROM events WHERE kind = 'sync_stuck'"
        )
        return [tuple(r) for r in rows] == [(farm_id, "critical")]

    await eventually(alerted, "a sync_stuck event on the farm")


async def _seed_farm(state: Path) -> str:
    db = Database(state / "agent.db")
    await db.open()
    try:
        farm_id = str(uuid.uuid4())
        async with db.transaction() as conn:
            await conn.execute(
                "INSERT INTO farms (id, name, status, created_at, updated_at)"
                " VALUES (?, 'Kill site', 'active', '2024-01-01T00:00:00.000Z',"
                " '2024-01-01T00:00:00.000Z')",
                (farm_id,),
            )
        return await add_device(db, farm_id)
    finally:
        await db.close()


async def test_kill_9_during_compaction_loses_and_doubles_nothing(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    device_id = await _seed_farm(state)
    log = tmp_path / "agent.log"
    env = {"FARM_OUTBOX_MAX_BYTES": "40000"}
    agent = _start_agent(state, log, env)
    try:
        await _mirrored(cloud, device_id)
        await cloud.stop()
        rng = random.Random(7)
        for round_ in range(4):
            start = T0 + round_ * 1_200_000
            await _write(state / "agent.db", device_id, [start + i * 1000 for i in range(1200)])
            await asyncio.sleep(rng.uniform(0.5, 2.5))  # the compactor checks every second
            agent.kill()
            agent.wait(30)
            agent = _start_agent(state, log, env)
        await cloud.start()
        await eventually(
            lambda: _drained(cloud, state / "agent.db"), f"every reading ({log})", limit_s=90
        )
    finally:
        agent.kill()
        agent.wait(30)
    await _assert_exact(cloud, state / "agent.db")
    rolled = await cloud.sql("SELECT count(*) FROM rollups")
    assert rolled[0][0] > 0, "the outbox never compacted: nothing was tested"


async def test_kill_9_during_a_split_resend_and_a_cloud_restart_mid_drain_change_nothing(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    await cloud.stop()
    cloud.settings = cloud.settings.model_copy(update={"max_body_bytes": 4096})
    await cloud.start()
    state = tmp_path / "state"
    await paired_state(cloud, state)
    device_id = await _seed_farm(state)
    await cloud.stop()
    for k in range(3):
        stamps = [T0 + k * 3_000_000 + i * 1000 for i in range(3000)]
        await _write(state / "agent.db", device_id, stamps, metric=f"m{k}")
    await cloud.start()
    log = tmp_path / "agent.log"
    env = {"FARM_SYNC_BATCH_MAX_BODY_BYTES": str(1024 * 1024)}
    agent = _start_agent(state, log, env)
    try:

        async def some() -> bool:
            rows = await cloud.sql("SELECT count(*) FROM readings")
            return int(rows[0][0]) > 0

        await eventually(some, "the first split batch landed", limit_s=60)
        agent.kill()
        agent.wait(30)
        agent = _start_agent(state, log, env)
        await eventually(some, "still landing")
        await cloud.stop()
        await asyncio.sleep(0.5)
        await cloud.start()
        await eventually(
            lambda: _drained(cloud, state / "agent.db"), f"every reading ({log})", limit_s=120
        )
    finally:
        agent.kill()
        agent.wait(30)
    await _assert_exact(cloud, state / "agent.db")
