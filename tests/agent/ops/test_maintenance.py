"""Low disk space is reported before writes fail; the WAL is checkpointed and truncated."""

from __future__ import annotations

from agent.web.keys import EVENT_LOG
from agent.wiring.ops import MAINTENANCE


async def test_low_disk_space_shows_in_health_and_as_an_event(make_agent):
    agent = await make_agent(disk_low_free_bytes=2**62)  # more than any disk has
    farm = await agent.client.post("/api/v1/farms/", json={"name": "F"}, headers=agent.auth())
    farm_id = (await farm.json())["id"]
    health = await (await agent.client.get("/healthz")).json()
    assert health["checks"]["disk"].startswith("low (")
    assert health["status"] == "degraded"
    maintenance = agent.client.app[MAINTENANCE]
    maintenance.storage.level = "ok"  # as if space had been fine until now
    await maintenance.check_disk()
    await agent.client.app[EVENT_LOG].flush()  # events are written in batches
    resp = await agent.client.get(
        "/api/v1/events", params={"kind": "disk_low"}, headers=agent.auth()
    )
    events = (await resp.json())["events"]
    assert [(e["farm_id"], e["severity"]) for e in events] == [(farm_id, "warning")]


async def test_plenty_of_disk_is_ok(agent):
    health = await (await agent.client.get("/healthz")).json()
    assert health["checks"]["disk"].startswith("ok (")


async def test_the_wal_is_truncated_by_a_checkpoint(agent, tmp_path):
    for i in range(50):
        await agent.client.post("/api/v1/farms/", json={"name": f"F{i}"}, headers=agent.auth())
    wal = tmp_path / "state" / "agent.db-wal"
    assert wal.stat().st_size > 0
    await agent.client.app[MAINTENANCE].checkpoint()
    assert wal.stat().st_size == 0


async def test_an_automatic_backup_lands_in_the_backup_dir(make_agent, tmp_path):
    import asyncio

    folder = tmp_path / "backups"
    agent = await make_agent(backup_dir=folder, backup_keep=2)
    maintenance = agent.client.app[MAINTENANCE]
    await maintenance.backup_now()
    (archive,) = await asyncio.to_thread(lambda: list(folder.glob("farm-agent-*.tar.gz")))
    assert maintenance.last_backup == archive.name
    health = await (await agent.client.get("/healthz")).json()
    assert health["status"] == "healthy"
