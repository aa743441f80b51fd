"""A grow plan synced by an agent is checked like the agent's API checks it (at least one stage,
days adding up), and the cloud's progress of a plan without stages answers instead of failing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp

from tests.cloud.api.conftest import Cloud, Conn, World
from tests.cloud.api.test_several_processes import _paired

_STAMP = "2024-01-01T00:00:00.000Z"
STAGE = {
    "name": "Vegetative",
    "days": 20,
    "temperature": {"target": 22, "band": 3},
    "humidity": {"target": 60, "band": 10},
    "light_hours": 16,
    "ppfd": 250,
}


def plan(farm_id: str, stages: list[Any], total_days: int) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "farm_id": farm_id,
        "species": "basil",
        "species_name": "Basil",
        "custom": 0,
        "plant_count": 10,
        "start_date": "2024-01-01",
        "stages": json.dumps(stages),
        "total_days": total_days,
        "status": "active",
        "shelves": "[]",
        "notes": "",
        "created_at": _STAMP,
        "updated_at": _STAMP,
    }


async def test_a_plan_without_stages_or_with_wrong_days_is_refused_alone(
    cloud: Cloud, world: World, system: Conn
) -> None:
    agent = await _paired(cloud, world)
    good = plan(agent.farm_id, [STAGE], 20)
    empty = plan(agent.farm_id, [], 30)
    wrong = plan(agent.farm_id, [STAGE], 45)
    records = [agent.record("grow_plans", p["id"], p) for p in (good, empty, wrong)]
    base = str(cloud.client.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        status, ack = await agent.post(session, base, agent.sign(records))
    assert status == 200, ack
    refused = {r["key"]: r["reason"] for r in ack["refused"]}
    assert set(refused) == {empty["id"], wrong["id"]}
    assert "at least one stage" in refused[empty["id"]]
    stored = await system.fetch("SELECT id FROM grow_plans WHERE farm_id = $1::uuid", agent.farm_id)
    assert [str(row["id"]) for row in stored] == [good["id"]]


async def test_progress_of_a_stored_plan_without_stages_is_no_server_error(
    cloud: Cloud, world: World, system: Conn
) -> None:
    # A row written before the mirror checked plans: no stages, yet a harvest date.
    plan_id = await system.fetchval(
        "INSERT INTO grow_plans (farm_id, name, species, status, stages, expected_harvest_at)"
        " VALUES ($1, 'Basil', 'basil', 'active', '[]'::jsonb, now() + interval '10 days')"
        " RETURNING id",
        world.farm_a.farm_id,
    )
    alice = await cloud.login(World.email("alice"))
    status, progress = await cloud.get(f"/api/v1/grow-plans/{plan_id}/progress", alice)
    assert status == 200, progress
    assert progress["total_days"] == 0 and progress["stages"] == []
    assert progress["percent"] in (0.0, 100.0)
