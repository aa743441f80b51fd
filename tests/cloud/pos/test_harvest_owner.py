"""Whose shop a synced harvest reaches (issue 24): a paired agent named another owner as its
farm's creator, harvested 1,000 kg of basil, and that owner's POS inventory went from 10 to
10,010. An agent now names as creator only its owner or a user the owner granted one of its
farms (anyone else is replaced by the owner), and a harvest goes to the configuration of the
agent's owner, or of an owner who opted in for that agent or farm."""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp

from tests.cloud.pos.conftest import FakeProvider, Owners, config_body, wait_for
from tests.cloud.seed import add_user
from tests.support.sim_agent import SimAgent

VARIATION, LOCATION = "VAR-BASIL-100G", "L001"
STAMP = "2024-01-01T00:00:00.000Z"
STAGE = {
    "name": "Grow",
    "days": 20,
    "temperature": {"target": 22, "band": 3},
    "humidity": {"target": 60, "band": 10},
    "light_hours": 16,
    "ppfd": 250,
}


async def _agent_of(owners: Owners, system: Any, password_hash: str, owner: str) -> SimAgent:
    """A simulated agent of ``owner``, paired by the cloud admin ``root`` (logged in as such)."""
    owners.ids["root"] = await add_user(system, "root@example.com", "admin")
    await system.execute("UPDATE users SET password_hash = $1", password_hash)
    admin = owners.tokens["root"] = await owners.cloud.login("root@example.com")
    resp = await owners.cloud.client.post(
        "/api/v1/agents",
        json={"name": "North", "owner_id": str(owners.ids[owner])},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert resp.status == 201, await resp.text()
    code = (await resp.json())["pairing_code"]
    async with aiohttp.ClientSession() as session:
        return await SimAgent.pair(session, _base(owners), code)


def _base(owners: Owners) -> str:
    return str(owners.cloud.client.make_url("")).rstrip("/")


def _farm(farm_id: str, created_by: str) -> dict[str, Any]:
    return {
        "id": farm_id,
        "name": "Basil house",
        "status": "active",
        "created_by": created_by,
        "created_at": STAMP,
        "updated_at": STAMP,
    }


def _harvest(farm_id: str, kg: int) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "farm_id": farm_id,
        "species": "basil",
        "species_name": "Basil",
        "plant_count": 40,
        "start_date": "2024-01-01",
        "stages": json.dumps([STAGE]),
        "total_days": 20,
        "status": "harvested",
        "ended_at": "2024-01-20T12:00:00.000Z",
        "harvested_quantity": kg,
        "harvest_unit": "kg",
        "shelves": "[]",
        "created_at": STAMP,
        "updated_at": STAMP,
    }


async def _send(owners: Owners, agent: SimAgent, *records: tuple[str, dict[str, Any]]) -> None:
    batch = agent.sign([agent.record(kind, data["id"], data) for kind, data in records])
    async with aiohttp.ClientSession() as session:
        status, ack = await agent.post(session, _base(owners), batch)
    assert status == 200 and not ack["refused"], ack


async def _settled(system: Any, plan_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {}

    async def done() -> bool:
        nonlocal row
        found = await system.fetchrow(
            "SELECT state, config_id FROM pos_harvest_pushes WHERE grow_plan_id = $1::uuid",
            plan_id,
        )
        row = dict(found) if found is not None else {}
        return row.get("state") in ("pushed", "unmapped", "failed")

    await wait_for(done, f"the push of {plan_id}")
    return row


async def test_an_agent_cannot_push_its_harvest_into_another_owners_shop(
    owners: Owners, fake: FakeProvider, system: Any, password_hash: str
) -> None:
    # The cloud admin's shop maps basil; alice's agent names the admin as its farm's creator
    # (the attack), then harvests 1,000 kg.
    agent = await _agent_of(owners, system, password_hash, "alice")
    mapping = {"species": "basil", "variation_id": VARIATION, "location_id": LOCATION, "unit": "kg"}
    _, shop = await owners.call(
        "root", "POST", "/api/v1/pos/configs", config_body(fake, crop_mappings=[mapping])
    )
    await owners.call("root", "PUT", f"/api/v1/pos/configs/{shop['id']}/activate")
    before = fake.merchant.count_of(VARIATION, LOCATION)
    root = str(owners.ids["root"])
    harvest = _harvest(agent.farm_id, 1000)
    await _send(owners, agent, ("farms", _farm(agent.farm_id, root)), ("grow_plans", harvest))

    creator = await system.fetchval("SELECT user_id FROM farms WHERE id = $1::uuid", agent.farm_id)
    assert creator == owners.ids["alice"]  # the owner, not the user the agent named
    settled = await _settled(system, harvest["id"])
    assert (settled["state"], settled["config_id"]) == ("unmapped", None)
    assert fake.merchant.count_of(VARIATION, LOCATION) == before  # the inventory did not move

    # The admin opts in for this agent's harvests: the next one reaches the shop.
    status, changed = await owners.call(
        "root",
        "PUT",
        f"/api/v1/pos/configs/{shop['id']}",
        {"harvest_agent_ids": [agent.agent_id]},
    )
    assert status == 200 and changed["harvest_agent_ids"] == [agent.agent_id], changed
    second = _harvest(agent.farm_id, 2)
    await _send(owners, agent, ("grow_plans", second))
    settled = await _settled(system, second["id"])
    assert (settled["state"], str(settled["config_id"])) == ("pushed", shop["id"])
    assert fake.merchant.count_of(VARIATION, LOCATION) == before + 2


async def test_a_creator_the_owner_granted_a_farm_is_kept(
    owners: Owners, fake: FakeProvider, system: Any, password_hash: str
) -> None:
    agent = await _agent_of(owners, system, password_hash, "alice")
    alice, bob = owners.ids["alice"], owners.ids["bob"]
    await _send(owners, agent, ("farms", _farm(agent.farm_id, str(alice))))
    # alice shares her farm with bob; a farm the agent makes later may name bob as its creator.
    await system.execute(
        "INSERT INTO permissions (user_id, farm_id, permission_type, granted_by)"
        " VALUES ($1, $2::uuid, 'read_only', $3)",
        bob,
        agent.farm_id,
        alice,
    )
    later = str(uuid.uuid4())
    await _send(owners, agent, ("farms", _farm(later, str(bob))))
    assert await system.fetchval("SELECT user_id FROM farms WHERE id = $1::uuid", later) == bob
    # A grant bob made himself vouches for nothing: nora stays out.
    nora = owners.ids["nora"]
    await system.execute(
        "INSERT INTO permissions (user_id, farm_id, permission_type, granted_by)"
        " VALUES ($1, $2::uuid, 'read_only', $3)",
        nora,
        later,
        bob,
    )
    third = str(uuid.uuid4())
    await _send(owners, agent, ("farms", _farm(third, str(nora))))
    creator = await system.fetchval("SELECT user_id FROM farms WHERE id = $1::uuid", third)
    assert creator == alice
