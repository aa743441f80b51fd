"""Batches the cloud answered with a refusal (a 503 here, a 409 for a clock far off in issue 30)
are sent again with the records their readings need: the device a reading names reaches the
cloud first, whatever was refused before, and no reading is dead-lettered for it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import UUID

import aiohttp
import pytest
from aiohttp import web

from agent.sync.link import CloudLink
from agent.sync.uploader import PATH
from agent.web.keys import DATABASE
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, add_readings, eventually, paired_state
from tests.support.reading_seed import add_device

_FORWARDED = ("X-Farm-Agent", "X-Farm-Signature", "Content-Type")


@dataclasses.dataclass
class Gate:
    """Between agent and cloud: answers batches 503 while closed, forwards them once open."""

    cloud_url: str
    url: str = ""
    closed: bool = True
    refused: int = 0


@pytest.fixture
async def gate(cloud: LiveCloud) -> AsyncIterator[Gate]:
    found = Gate(cloud.url)
    session = aiohttp.ClientSession()

    async def batch(request: web.Request) -> web.Response:
        body = await request.read()
        if found.closed:
            found.refused += 1
            return web.json_response({"success": False}, status=503)
        headers = {k: v for k, v in request.headers.items() if k in _FORWARDED}
        async with session.post(found.cloud_url + PATH, data=body, headers=headers) as resp:
            return web.Response(
                status=resp.status, body=await resp.read(), content_type=resp.content_type
            )

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "healthy"})

    app = web.Application()
    app.router.add_post(PATH, batch)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield found
    finally:
        await runner.cleanup()
        await session.close()


async def test_readings_refused_with_their_device_reach_the_cloud_after_it(
    cloud: LiveCloud, gate: Gate, make_agent: Any, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    link = CloudLink.load(state)
    assert link is not None
    dataclasses.replace(link, cloud_url=gate.url).save(state)
    agent: Agent = await make_agent(**FAST_SYNC)
    resp = await agent.client.post("/api/v1/farms/", json={"name": "Gated"}, headers=agent.auth())
    assert resp.status == 201, await resp.text()
    device_id = await add_device(agent.client.app[DATABASE], (await resp.json())["id"])
    await add_readings(state / "agent.db", device_id, 1_700_000_000_000, 40)
    seen = gate.refused

    async def refused_twice() -> bool:
        return gate.refused >= seen + 2

    await eventually(refused_twice, "batches with the device and its readings refused")
    gate.closed = False

    async def arrived() -> bool:
        rows = await cloud.sql(
            "SELECT count(*) FROM readings WHERE device_id = $1", UUID(device_id)
        )
        return int(rows[0][0]) == 40

    await eventually(arrived, "every reading in the cloud")
    dead = await cloud.sql("SELECT count(*) FROM sync_dead_letters")
    assert dead[0][0] == 0
