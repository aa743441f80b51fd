"""A harvest reaches the shop: a grow plan harvested on the agent, with its quantity, syncs to
the cloud, which adds it to the POS inventory of the variation its crop maps to (through the
fake provider) and shows the new count in GET /api/v1/pos/inventory. A re-sent harvested plan
and a push repeated after a crash add nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from cloud.pos_provider.fake import FakeMerchant, fake_app
from farmkit.secretbox import new_key_text
from tests.agent.hierarchy_helpers import farm, rack, row, send, shelf
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state

VARIATION, LOCATION = "VAR-BASIL-100G", "L001"


@pytest.fixture
async def merchant() -> AsyncIterator[tuple[FakeMerchant, str]]:
    fake = FakeMerchant.sample("shop-token")
    server = TestServer(fake_app(fake), host="127.0.0.1")
    await server.start_server()
    try:
        yield fake, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


@pytest.fixture
def cloud_overrides(merchant: tuple[FakeMerchant, str]) -> dict[str, Any]:
    return {
        "pos_sandbox_url": merchant[1],
        "pos_sync_interval_s": 0,
        "pos_poll_interval_s": 0.05,
        "secret_key": new_key_text(),
    }


async def call(cloud: LiveCloud, token: str, method: str, path: str, body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, cloud.url + path, json=body, headers={"Authorization": f"Bearer {token}"}
        ) as resp,
    ):
        assert resp.status < 300, await resp.text()
        return await resp.json()


async def test_a_harvest_on_the_farm_reaches_the_shops_inventory_once(
    cloud: LiveCloud,
    make_agent: Any,
    tmp_path: Path,
    merchant: tuple[FakeMerchant, str],
) -> None:
    fake, _ = merchant
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    token = await cloud.login(owner_email)
    config = await call(
        cloud,
        token,
        "POST",
        "/api/v1/pos/configs",
        {
            "name": "Farm shop",
            "access_token": "shop-token",
            "crop_mappings": [
                {
                    "species": "basil_genovese",
                    "variation_id": VARIATION,
                    "location_id": LOCATION,
                    "unit": "kg",
                    "factor": 10,  # 100 g packs per kg
                }
            ],
        },
    )
    await call(cloud, token, "PUT", f"/api/v1/pos/configs/{config['id']}/activate")
    before = fake.count_of(VARIATION, LOCATION)

    agent: Agent = await make_agent(**FAST_SYNC)
    farm_id = (await farm(agent, "Basil house"))["id"]
    rack_id = (await rack(agent, (await row(agent, farm_id, 1))["id"], 1))["id"]
    shelf_id = (await shelf(agent, rack_id, 1, plant_capacity=40))["id"]
    plan = await send(
        agent,
        "POST",
        "/api/v1/grow-plans",
        {
            "farm_id": farm_id,
            "shelf_ids": [shelf_id],
            "species": "basil_genovese",
            "plant_count": 40,
            "status": "active",
        },
        expect=201,
    )
    path = f"/api/v1/grow-plans/{plan['id']}"
    body = {"status": "harvested", "harvested_quantity": 1.5, "harvest_unit": "kg"}
    await send(agent, "PUT", path, body, expect=200)

    async def pushed() -> bool:
        return fake.count_of(VARIATION, LOCATION) == before + 15

    await eventually(pushed, "the harvest added to the POS inventory")

    async def shown() -> bool:
        page = await call(cloud, token, "GET", f"/api/v1/pos/inventory?location_id={LOCATION}")
        counts = [c for c in page["inventory"] if c["catalog_object_id"] == VARIATION]
        return bool(counts) and float(counts[0]["quantity"]) == before + 15

    await eventually(shown, "the new count in the mirror")

    # The harvested plan arrives again (an edit after the harvest): nothing more is added.
    await send(agent, "PUT", path, {"notes": "sold out by noon"}, expect=200)

    async def synced() -> bool:
        rows = await cloud.sql("SELECT notes FROM grow_plans WHERE id = $1", plan["id"])
        return bool(rows) and rows[0]["notes"] == "sold out by noon"

    await eventually(synced, "the edit in the cloud")
    # The cloud crashed after the provider applied the push but before it recorded it: the
    # push runs again with the same idempotency key, and the provider adds nothing.
    await cloud.sql(
        "UPDATE pos_harvest_pushes SET state = 'pending', attempts = 0 WHERE grow_plan_id = $1",
        plan["id"],
    )

    async def recorded_again() -> bool:
        rows = await cloud.sql(
            "SELECT state FROM pos_harvest_pushes WHERE grow_plan_id = $1", plan["id"]
        )
        return rows[0]["state"] == "pushed"

    await eventually(recorded_again, "the repeated push recorded")
    assert fake.count_of(VARIATION, LOCATION) == before + 15
    adjustments = [p for m, p in fake.requests if p == "/v2/inventory/changes/batch-create"]
    assert len(adjustments) == 2
