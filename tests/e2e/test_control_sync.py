"""Grow plans and climate settings made on the agent reach the cloud's mirror."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from agent.web.keys import DATABASE
from protocol.timefmt import now_iso
from tests.agent.hierarchy_helpers import farm, rack, row, send, shelf
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state


async def _fan(agent: Agent, farm_id: str) -> str:
    fan_id = str(uuid.uuid4())
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "INSERT INTO devices (id, farm_id, name, kind, device_type, created_at, updated_at)"
            " VALUES (?, ?, 'Exhaust', 'fan', 'exhaust_fan', ?, ?)",
            (fan_id, farm_id, now_iso(), now_iso()),
        )
    return fan_id


async def test_a_grow_plan_and_climate_settings_arrive_in_the_cloud(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    farm_id = (await farm(agent, "Basil house"))["id"]
    rack_id = (await rack(agent, (await row(agent, farm_id, 1))["id"], 1))["id"]
    shelves = [(await shelf(agent, rack_id, level, plant_capacity=40))["id"] for level in (1, 2)]
    plan = await send(
        agent,
        "POST",
        "/api/v1/grow-plans",
        {
            "farm_id": farm_id,
            "shelf_ids": shelves,
            "species": "basil_genovese",
            "plant_count": 60,
            "status": "active",
        },
        expect=201,
    )
    await send(
        agent,
        "POST",
        "/api/v1/climate-control/update",
        {
            "farm_id": farm_id,
            "temperature": {"target": 24, "band": 1.5},
            "humidity": {"target": 65, "band": 8},
            "mode": "auto",
            "fan_ids": [await _fan(agent, farm_id)],
        },
        expect=200,
    )

    async def plan_arrived() -> bool:
        rows = await cloud.sql(
            "SELECT species, status, shelf_id::text, shelves, plant_count, expected_harvest_at"
            " FROM grow_plans WHERE id = $1::uuid",
            plan["id"],
        )
        return bool(rows) and rows[0][1] == "active"

    await eventually(plan_arrived, "the grow plan in the cloud")
    ((species, status, first_shelf, mirrored, plant_count, harvest),) = await cloud.sql(
        "SELECT species, status, shelf_id::text, shelves, plant_count, expected_harvest_at"
        " FROM grow_plans WHERE id = $1::uuid",
        plan["id"],
    )
    assert (species, status, first_shelf, plant_count) == (
        "basil_genovese",
        "active",
        shelves[0],
        60,
    )
    assert [entry["shelf_id"] for entry in json.loads(mirrored)] == shelves
    assert harvest is not None

    async def climate_arrived() -> bool:
        rows = await cloud.sql(
            "SELECT settings FROM climate_settings WHERE farm_id = $1::uuid", farm_id
        )
        return bool(rows)

    await eventually(climate_arrived, "the climate settings in the cloud")
    ((settings,),) = await cloud.sql(
        "SELECT settings FROM climate_settings WHERE farm_id = $1::uuid", farm_id
    )
    document = json.loads(settings)
    assert (document["temperature_target"], document["mode"]) == (24, "auto")

    await send(
        agent, "PUT", f"/api/v1/grow-plans/{plan['id']}", {"status": "harvested"}, expect=200
    )

    async def harvested() -> bool:
        rows = await cloud.sql("SELECT status FROM grow_plans WHERE id = $1::uuid", plan["id"])
        return rows[0][0] == "harvested"

    await eventually(harvested, "the harvest in the cloud")
