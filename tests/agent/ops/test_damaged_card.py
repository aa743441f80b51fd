"""A damaged database: the agent quarantines it, salvages what it can read, says so, and starts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path

from aiohttp import web

from agent.app import create_app
from agent.ops.integrity import SALVAGE_MARKER
from agent.ops.salvage import damage
from agent.services.readings.writer import IncomingReading, ReadingWriter
from agent.store.db import Database
from agent.store.readings import ReadingStore
from agent.web.keys import HEALTH
from protocol.identity import Principal, Role
from tests.conftest import ADMIN_EMAIL, agent_settings
from tests.support.reading_ingester import T0
from tests.support.reading_seed import add_device, add_farm

READINGS = 20_000


async def seed(path: Path) -> tuple[str, str]:
    """A real agent database (its first admin made by an agent's first start) with a farm,
    a device and many readings; (farm, device)."""
    runner = web.AppRunner(create_app(agent_settings(path.parent)))
    await runner.setup()
    await runner.cleanup()
    db = Database(path)
    await db.open()
    admin = await db.fetch_one("SELECT id, email FROM users WHERE email = ?", (ADMIN_EMAIL,))
    assert admin is not None
    farm_id = await add_farm(db, Principal(admin["id"], admin["email"], Role.ADMIN))
    device_id = await add_device(db, farm_id)
    writer = ReadingWriter(ReadingStore(db), batch_interval=0.01, max_batch=2000, max_age_ms=2**62)
    await writer.start()
    for i in range(READINGS):
        writer.submit(IncomingReading(device_id, "ph", "pH", float(i), received_ts=T0 + i * 1000))
    await writer.flush(60)
    await writer.stop()
    await db.checkpoint()
    await db.close()
    return farm_id, device_id


def corrupt_reading_pages(path: Path, count: int) -> None:
    """Overwrite ``count`` leaf pages of the readings table in the middle of the file."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [
            row[0]
            for row in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'readings' AND pagetype = 'leaf'"
                " ORDER BY pageno"
            )
        ]
    assert len(pages) > 3 * count
    middle = len(pages) // 2
    with path.open("r+b") as stream:
        for page in pages[middle : middle + count]:
            stream.seek((page - 1) * size)
            stream.write(b"\xa5" * size)


async def test_the_agent_starts_on_what_a_damaged_database_still_holds(make_agent, tmp_path):
    path = tmp_path / "state" / "agent.db"
    farm_id, device_id = await seed(path)
    original = path.read_bytes()
    corrupt_reading_pages(path, 3)
    assert damage(path), "the corruption must be one quick_check sees"

    # The reading tables are checked after READY: the first start finds the damage, asks for
    # a salvage and stops the watchdog pings (systemd restarts it).
    first = await make_agent()
    health = await wait_for_runtime_fault(first)
    assert "database damaged" in health["checks"]["runtime"]
    assert first.client.app[HEALTH].problem() is not None  # no more watchdog pings
    assert (tmp_path / "state" / SALVAGE_MARKER).exists()
    await first.client.close()

    agent = await make_agent()  # the restart salvages; logs in: the users survived

    health = await (await agent.client.get("/healthz")).json()
    assert "rows kept" in health["checks"]["database_salvage"]
    (quarantine,) = (tmp_path / "state" / "quarantine").iterdir()
    # Kept whole, never deleted (the first start appended a few pages to it).
    assert (quarantine / "agent.db").stat().st_size >= len(original)
    report = json.loads((quarantine / "report.json").read_text())
    assert report["damaged_spots"] == {"readings": 1} or report["damaged_spots"]["readings"] >= 1

    resp = await agent.client.get(
        "/api/v1/events", params={"kind": "database_salvaged"}, headers=agent.auth()
    )
    events = (await resp.json())["events"]
    assert [e["farm_id"] for e in events] == [farm_id]
    assert events[0]["severity"] == "critical"
    assert not (tmp_path / "state" / SALVAGE_MARKER).exists()

    resp = await agent.client.get(f"/api/v1/devices/{device_id}", headers=agent.auth())
    assert resp.status == 200
    kept = report["rows"]["readings"]
    # Three pages of a few hundred readings each are lost; everything else is back.
    assert READINGS - 1500 < kept < READINGS
    assert not damage(path)


async def wait_for_runtime_fault(agent) -> dict:
    """/healthz once the background check has reported (a hung check fails the test)."""
    async with asyncio.timeout(120):
        while True:
            health = await (await agent.client.get("/healthz")).json()
            if "runtime" in health["checks"]:
                return health
            await asyncio.sleep(0.05)


async def test_damage_outside_the_reading_tables_is_salvaged_at_once(make_agent, tmp_path):
    path = tmp_path / "state" / "agent.db"
    await seed(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        (page,) = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_users_1'"
        ).fetchone()
    with path.open("r+b") as stream:
        stream.seek((page - 1) * size)
        stream.write(b"\xa5" * size)
    agent = await make_agent()
    health = await (await agent.client.get("/healthz")).json()
    assert "rows kept" in health["checks"]["database_salvage"]


async def test_a_sound_database_is_left_alone(make_agent, tmp_path):
    path = tmp_path / "state" / "agent.db"
    await seed(path)
    agent = await make_agent()
    health = await (await agent.client.get("/healthz")).json()
    assert "database_salvage" not in health["checks"]
    assert not (tmp_path / "state" / "quarantine").exists()
