"""The cloud's web app shows a farm that a paired agent synced, and updates it live from the
cloud's streams (a real Chromium, async API: the cloud and the agent run on the test's own
event loop)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from agent.sync.pairing import pair
from cloud.web.keys import STREAMS
from tests.conftest import Agent
from tests.e2e.cloud_browser import signed_in_pages
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, add_readings, eventually, paired_state
from tests.webui.conftest import (
    ARTIFACTS,
    WAIT_MS,
    assert_no_serious,
)


async def _synced_farm(cloud: LiveCloud, agent: Agent, state: Path) -> str:
    """A farm with a row, a rack, a shelf and a sensor with fresh readings, mirrored; the
    sensor's id."""

    async def create(path: str, body: dict[str, Any]) -> str:
        resp = await agent.client.post(path, json=body, headers=agent.auth())
        assert resp.status == 201, await resp.text()
        return str((await resp.json())["id"])

    farm = await create("/api/v1/farms/", {"name": "North site", "location": "Valley road"})
    row = await create("/api/v1/rows/", {"farm_id": farm, "name": "Row 1", "position": 1})
    rack = await create("/api/v1/racks/", {"row_id": row, "name": "Rack 1", "position": 1})
    shelf = await create(
        "/api/v1/shelves/",
        {
            "rack_id": rack,
            "name": "Top",
            "level": 1,
            "plant_capacity": 30,
            "current_species": "lettuce",
        },
    )
    await create(
        "/api/v1/grow-plans",
        {
            "farm_id": farm,
            "shelf_ids": [shelf],
            "species": "lettuce_butterhead",
            "plant_count": 24,
            "status": "active",
        },
    )
    sensor = await create(
        "/api/v1/devices",
        {
            "name": "Rack 1 climate",
            "kind": "sensor",
            "farm_id": farm,
            "location": "Rack 1",
            "device_type": "temperature_humidity",
        },
    )
    now_ms = int(time.time() * 1000)
    await add_readings(state / "agent.db", sensor, now_ms - 60_000, 30, 2000)

    async def mirrored() -> bool:
        rows = await cloud.sql("SELECT count(*) FROM readings")
        shelves = await cloud.sql("SELECT count(*) FROM shelves")
        plans = await cloud.sql("SELECT count(*) FROM grow_plans")
        return int(rows[0][0]) >= 30 and int(shelves[0][0]) == 1 and int(plans[0][0]) == 1

    await eventually(mirrored, "the farm and its readings in the cloud")
    return sensor


def cloud_app(cloud: LiveCloud) -> web.Application:
    """The application of the running cloud."""
    assert cloud.runner is not None
    return cloud.runner.app


def _true_when(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def poll() -> bool:
        return check()

    return poll


async def test_the_cloud_ui_shows_a_synced_farm_and_updates_it_live(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    sensor = await _synced_farm(cloud, agent, tmp_path / "state")
    agent_plans = await (await agent.client.get("/api/v1/grow-plans", headers=agent.auth())).json()
    async with aiohttp.ClientSession() as session:
        token = await cloud.login(owner_email)
        async with session.get(
            cloud.url + "/api/v1/grow-plans", headers={"Authorization": f"Bearer {token}"}
        ) as resp:
            cloud_plans = await resp.json()
            assert resp.status == 200, cloud_plans
    compared = (
        "id",
        "species",
        "species_name",
        "start_date",
        "expected_harvest_date",
        "total_days",
        "shelves",
        "plant_count",
        "status",
        "stages",
    )
    assert [{k: p[k] for k in compared} for p in cloud_plans["grow_plans"]] == [
        {k: p[k] for k in compared} for p in agent_plans["grow_plans"]
    ]
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            cloud.url + "/api/v1/pos/configs",
            json={"name": "Farm shop", "access_token": "EAAA-sandbox-token"},
            headers={"Authorization": f"Bearer {token}"},
        ) as resp,
    ):
        assert resp.status == 201, await resp.text()
    streams = cloud_app(cloud)[STREAMS]
    async with aclosing(signed_in_pages(cloud.url, owner_email)) as pages:
        async for size, page in pages:
            # The cloud's first screen lists every farm the caller may see.
            card = page.locator('[data-farm="North site"]')
            await expect(card).to_contain_text("1 rows · 1 racks · 1 shelves", timeout=WAIT_MS)
            await page.screenshot(path=str(ARTIFACTS / f"cloud-farms-{size}.png"))
            assert_no_serious((await Axe().run(page)).response, "cloud farms")
            await card.get_by_role("button", name="Open North site").click()
            shelf = page.locator('[data-shelf="Top"]')
            await expect(shelf).to_contain_text("Lettuce, butterhead", timeout=WAIT_MS)
            await expect(shelf.locator('[data-metric="temperature"]')).to_be_visible(
                timeout=WAIT_MS
            )
            await expect(page.locator("#banner")).to_be_hidden()
            if size == "tablet":
                # A reading taken on the farm now shows up without a reload, once synced.
                await eventually(
                    _true_when(lambda: streams.connections >= 3), "the overview's streams"
                )
                await add_readings(
                    tmp_path / "state" / "agent.db", sensor, int(time.time() * 1000), 1,
                    value=27.3,
                )  # fmt: skip
                await expect(shelf.locator('[data-metric="temperature"]')).to_contain_text(
                    "27.3", timeout=WAIT_MS
                )
            await page.screenshot(
                path=str(ARTIFACTS / f"cloud-overview-{size}.png"), full_page=True
            )
            assert_no_serious((await Axe().run(page)).response, "cloud overview")
            if size == "tablet":
                # Admin: the POS configuration and its (never run) sync; no hub here.
                await page.goto(cloud.url + "/#/admin")
                pos = page.locator('[data-panel="pos-title"]')
                await expect(pos.locator('[data-config="Farm shop"]')).to_contain_text(
                    "never", timeout=WAIT_MS
                )
                hub = page.locator('[data-panel="hub-title"]')
                await expect(hub.locator('[data-state="not-configured"]')).to_be_visible()
                await page.screenshot(path=str(ARTIFACTS / "cloud-admin-tablet.png"))
                assert_no_serious((await Axe().run(page)).response, "cloud admin")


async def test_an_admin_of_an_empty_cloud_is_shown_how_to_pair_an_agent(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    """The empty Farms screen makes a pairing code and shows the command; the code pairs."""
    await cloud.add_user("admin", "root@cloud.test")
    codes: list[str] = []
    async with aclosing(signed_in_pages(cloud.url, "root@cloud.test")) as pages:
        async for size, page in pages:
            await expect(page.get_by_role("heading", name="pair a farm's agent")).to_be_visible()
            await page.get_by_label("Name of the farm's agent").fill(f"Site {size}")
            await page.get_by_role("button", name="Make a pairing code").click()
            command = page.locator("[data-pairing-code]")
            await expect(command).to_contain_text(f"farm-agent pair --cloud {cloud.url}")
            codes.append(str(await command.get_attribute("data-pairing-code")))
            await page.screenshot(path=str(ARTIFACTS / f"cloud-pairing-{size}.png"))
            assert_no_serious((await Axe().run(page)).response, "cloud pairing")
    await pair(cloud.url, codes[0], tmp_path / "state")  # what the command shown does
    agent: Agent = await make_agent(**FAST_SYNC)
    resp = await agent.client.post("/api/v1/farms/", json={"name": "Paired"}, headers=agent.auth())
    assert resp.status == 201

    async def synced() -> bool:
        rows = await cloud.sql("SELECT count(*) FROM farms WHERE name = 'Paired'")
        return int(rows[0][0]) == 1

    await eventually(synced, "the paired agent's farm in the cloud")
