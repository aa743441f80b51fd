"""A full or filling store: requests answer 503 and change nothing, events wait for room, and
space is freed in its stated order without touching what the farm still needs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.ops.backup import create_backup
from agent.ops.reclaim import Reclaimer
from agent.store.db import Database
from agent.store.readings import NewReading, ReadingStore
from agent.web.keys import DATABASE, EVENT_LOG
from agent.wiring.ops import MAINTENANCE
from integrations.webhooks import new_secret
from protocol.timefmt import iso
from tests.agent.devices_api.conftest import create_farm
from tests.conftest import Agent, AgentFactory
from tests.support.reading_seed import add_device, add_farm, add_user

DAY_MS = 86_400_000


async def cap_at_present_size(db: Database) -> None:
    """Let the database grow no further (as a card with no space left)."""
    size = await db.size()
    await db.cap(size.pages * size.page_size)


async def test_a_write_refused_for_lack_of_space_is_a_503_and_changes_nothing(
    agent: Agent,
) -> None:
    db = agent.client.app[DATABASE]
    await cap_at_present_size(db)
    accepted, refused = 0, None
    for i in range(200):  # free space inside the last pages takes a few
        resp = await agent.client.post(
            "/api/v1/farms/",
            json={"name": f"Farm {i}", "description": "x" * 2000},
            headers=agent.auth(),
        )
        if resp.status != 201:
            refused = resp
            break
        accepted += 1
    assert refused is not None and refused.status == 503
    assert (await refused.json())["error"]["code"] == "STORAGE_FULL"
    assert await db.fetch_value("SELECT count(*) FROM farms") == accepted
    assert await db.fetch_value("SELECT count(*) FROM outbox WHERE kind = 'farm'") == accepted
    # The API still answers reads meanwhile.
    assert (await agent.client.get("/api/v1/farms/", headers=agent.auth())).status == 200

    await db.cap(None)
    assert await create_farm(agent, name="After")
    assert await db.fetch_value("PRAGMA integrity_check") == "ok"


async def test_events_written_while_full_wait_and_are_stored_once_room_returns(
    agent: Agent,
) -> None:
    app = agent.client.app
    db, events = app[DATABASE], app[EVENT_LOG]
    farm_id = await create_farm(agent)
    await cap_at_present_size(db)
    for i in range(300):
        events.notice(farm_id, "filling", {"i": i, "padding": "y" * 500}, severity="info")
    await _eventually(lambda: events.stats.failed_batches > 0)
    assert events.stats.dropped == 0

    await db.cap(None)
    await asyncio.wait_for(events.flush(), 30)
    stored = await db.fetch_value("SELECT count(*) FROM events WHERE kind = 'filling'")
    assert stored == 300
    assert await db.fetch_value("PRAGMA integrity_check") == "ok"


async def test_space_is_freed_in_order_and_never_from_what_the_farm_needs(
    make_agent: AgentFactory, tmp_path: Path
) -> None:
    backups = tmp_path / "state" / "backups"
    agent: Agent = await make_agent(backup_dir=backups, disk_low_free_bytes=2**62)
    app = agent.client.app
    db, maintenance = app[DATABASE], app[MAINTENANCE]
    admin = await add_user(db)
    farm_id = await add_farm(db, admin)
    device = await add_device(db, farm_id)
    now = int(datetime.now(UTC).timestamp() * 1000)
    old, recent = now - 10 * DAY_MS, now - DAY_MS
    await ReadingStore(db).write(
        [NewReading(device, "ph", "pH", old + i * 1000, 6.0) for i in range(600)]
        + [NewReading(device, "ph", "pH", recent + i * 1000, 6.5) for i in range(60)]
    )
    await _deliveries(db, farm_id)
    backups.mkdir()
    for hour in range(3):
        await asyncio.to_thread(
            create_backup,
            tmp_path / "state",
            db.path,
            backups,
            version="t",
            now=datetime(2026, 1, 1, hour, tzinfo=UTC),
        )
    unsent = await _outbox(db)
    events_before = await db.fetch_value("SELECT count(*) FROM events")

    await maintenance.check_disk()  # the room is under the (huge) watermark: free what may go

    assert await db.fetch_value("SELECT count(*) FROM readings") == 60  # the recent ones
    # The rollups of the deleted raw readings stay.
    assert await db.fetch_value("SELECT sum(n) FROM readings_1m") == 660
    assert await db.fetch_value("SELECT sum(n) FROM readings_1h") == 660
    statuses = await db.fetch_all("SELECT status FROM webhook_deliveries")
    assert [row[0] for row in statuses] == ["pending"]
    assert len(list(backups.glob("farm-agent-*.tar.gz"))) == 1
    assert unsent <= await _outbox(db)  # every unsent record is still there
    await app[EVENT_LOG].flush()
    steps = {step["step"]: step for step in await _reclaimed(agent)}
    # (The WAL's event went out at start-up already: a repeat waits ten minutes.)
    assert {"raw_readings", "webhook_deliveries", "backups"} <= set(steps)
    assert steps["raw_readings"]["items"] == 600
    assert steps["webhook_deliveries"]["items"] == 2 and steps["backups"]["items"] == 2
    assert all(step["freed_bytes"] > 0 for step in steps.values())
    assert await db.fetch_value("SELECT count(*) FROM events") > events_before  # none deleted
    assert await db.fetch_value("PRAGMA integrity_check") == "ok"


async def test_the_steps_run_in_their_stated_order_until_there_is_room(tmp_path: Path) -> None:
    db = Database(tmp_path / "agent.db")
    await db.open()
    try:
        admin = await add_user(db)
        farm_id = await add_farm(db, admin)
        device = await add_device(db, farm_id)
        old = int(datetime.now(UTC).timestamp() * 1000) - 10 * DAY_MS
        await ReadingStore(db).write(
            [NewReading(device, "ph", "pH", old + i * 1000, 6.0) for i in range(600)]
        )
        await _deliveries(db, farm_id)
        reclaimer = Reclaimer(db, raw_after_days=7, backup_dir=None)

        async def never() -> bool:
            return False

        assert [f.step for f in await reclaimer.run(never)] == [
            "raw_readings",
            "webhook_deliveries",
            "wal",
        ]
        # Room again after the first step: the settled deliveries stay.
        await _deliveries(db, farm_id)
        await ReadingStore(db).write(
            [NewReading(device, "ph", "pH", old + i * 1000, 6.0) for i in range(600, 700)]
        )
        answers = iter([False, True])

        async def after_one() -> bool:
            return next(answers)

        assert [f.step for f in await reclaimer.run(after_one)][:1] == ["raw_readings"]
        assert await db.fetch_value("SELECT count(*) FROM webhook_deliveries") == 4
    finally:
        await db.close()


async def _deliveries(db: Database, farm_id: str) -> None:
    """One webhook with a delivered, a failed and a pending delivery."""
    hook = str(uuid.uuid4())
    when = iso(datetime.now(UTC) - timedelta(hours=1))
    await db.write(
        lambda conn: conn.execute(
            "INSERT INTO webhooks (id, farm_id, url, event_types, secret, enabled, created_at,"
            " updated_at) VALUES (?, ?, 'http://127.0.0.1:9/', '[]', ?, 0, ?, ?)",
            (hook, farm_id, new_secret(), when, when),
        )
    )
    for status in ("delivered", "failed", "pending"):
        await db.write(
            lambda conn, status=status: conn.execute(
                "INSERT INTO webhook_deliveries (id, webhook_id, event_type, body, status,"
                " created_at, next_attempt_at) VALUES (?, ?, 'test', ?, ?, ?, ?)",
                (str(uuid.uuid4()), hook, "{}" + " " * 4000, status, when, when),
            )
        )


async def _outbox(db: Database) -> set[int]:
    """Sequence numbers of the unsent records, readings' own table and the stage included."""
    rows = await db.fetch_all(
        "SELECT seq FROM outbox UNION ALL SELECT seq FROM outbox_readings"
        " UNION ALL SELECT seq FROM outbox_staged"
    )
    return {row[0] for row in rows}


async def _reclaimed(agent: Agent) -> list[dict[str, Any]]:
    resp = await agent.client.get(
        "/api/v1/events", params={"kind": "storage_reclaimed"}, headers=agent.auth()
    )
    events = (await resp.json())["events"]
    farm = events[0]["farm_id"]  # one event per farm
    return [e["data"] for e in events if e["farm_id"] == farm]


async def _eventually(condition: Any, within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
