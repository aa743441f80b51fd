"""Agent events reach the cloud's events table and read API, acknowledgement included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from agent.web.keys import DATABASE, EVENT_LOG
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state
from tests.support.reading_seed import add_device


async def test_an_agent_event_and_its_acknowledgement_arrive_in_the_cloud(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    resp = await agent.client.post("/api/v1/farms/", json={"name": "North"}, headers=agent.auth())
    farm_id = (await resp.json())["id"]
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    event_id = agent.client.app[EVENT_LOG].record(
        farm_id, device_id, "device_fault", "error", "probe silent", {"event": "fault"}
    )
    await agent.client.app[EVENT_LOG].flush()

    async def in_cloud(acknowledged: bool) -> bool:
        rows = await cloud.sql("SELECT acknowledged_at FROM events WHERE id = $1::uuid", event_id)
        return bool(rows) and (rows[0][0] is not None) == acknowledged

    await eventually(lambda: in_cloud(False), "the event in the cloud")
    token = await cloud.login(owner_email)
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{cloud.url}/api/v1/events",
            params={"farm_id": farm_id},
            headers={"Authorization": f"Bearer {token}"},
        ) as got,
    ):
        assert got.status == 200, await got.text()
        events = (await got.json())["events"]
    assert [(e["id"], e["device_id"], e["kind"], e["severity"]) for e in events] == [
        (event_id, device_id, "device_fault", "error")
    ]
    assert events[0]["data"] == {"event": "fault"}

    ack = await agent.client.post(f"/api/v1/events/{event_id}/acknowledge", headers=agent.auth())
    assert ack.status == 200, await ack.text()
    await eventually(lambda: in_cloud(True), "the acknowledgement in the cloud")
