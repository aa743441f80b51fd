"""GET/POST /api/v1/grow-plans and PUT /api/v1/grow-plans/{id}: shapes, life cycle, shelves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent.web.keys import DATABASE
from tests.agent.grow_plans.conftest import farm_with_shelves, get_shelf, plan_body
from tests.agent.hierarchy_helpers import (
    ISO_MS_Z,
    NOWHERE,
    assert_error,
    error_fields,
    grant,
    make_user,
    send,
)
from tests.conftest import Agent

PLAN_KEYS = {
    "id",
    "farm_id",
    "species",
    "species_name",
    "custom",
    "plant_count",
    "shelves",
    "start_date",
    "expected_harvest_date",
    "total_days",
    "stages",
    "status",
    "notes",
    "created_by",
    "started_at",
    "ended_at",
    "harvest_notified_at",
    "harvested_quantity",
    "harvest_unit",
    "created_at",
    "updated_at",
}
CUSTOM_STAGES = [
    {
        "name": "sprout",
        "days": 3,
        "temperature": {"target": 21.0, "band": 2.0},
        "humidity": {"target": 80.0, "band": 10.0},
        "light_hours": 0,
        "ppfd": 0,
    },
    {
        "name": "green",
        "days": 7,
        "temperature": {"target": 21.0, "band": 3.0},
        "humidity": {"target": 60.0, "band": 10.0},
        "light_hours": 16,
        "ppfd": 150,
    },
]


async def create(agent: Agent, body: dict[str, Any], expect: int = 201) -> Any:
    """POST a plan as the admin."""
    return await send(agent, "POST", "/api/v1/grow-plans", body, expect=expect)


async def put(agent: Agent, plan_id: str, body: dict[str, Any], expect: int = 200) -> Any:
    """PUT a plan as the admin."""
    return await send(agent, "PUT", f"/api/v1/grow-plans/{plan_id}", body, expect=expect)


async def test_create_a_planned_plan_from_the_catalogue(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await create(agent, plan_body(the_farm, start_date="2026-03-01"))
    assert set(plan) == PLAN_KEYS
    assert plan["status"] == "planned"
    assert plan["species_name"] == "Lettuce, butterhead" and plan["custom"] is False
    assert plan["shelves"] == [{"shelf_id": the_farm.shelves[0], "plant_count": 10}]
    assert plan["total_days"] == sum(stage["days"] for stage in plan["stages"]) == 35
    assert plan["start_date"] == "2026-03-01"
    assert plan["expected_harvest_date"] == "2026-04-04"  # day 35 of the plan
    assert ISO_MS_Z.match(plan["created_at"]) and plan["started_at"] is None
    # A plan that has not started leaves its shelves alone.
    shelf = await get_shelf(agent, the_farm, the_farm.shelves[0])
    assert shelf["current_species"] is None and shelf["current_plant_count"] == 0


async def test_starting_and_harvesting_sets_and_clears_the_shelves(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 30, 10)
    plan = await create(agent, plan_body(the_farm, shelf_ids=the_farm.shelves, plant_count=20))
    # Plants are shared in proportion to capacity: 30 and 10 places hold 15 and 5 of 20.
    assert [s["plant_count"] for s in plan["shelves"]] == [15, 5]

    started = await put(agent, plan["id"], {"status": "active"})
    assert started["status"] == "active" and ISO_MS_Z.match(started["started_at"])
    first, second = [await get_shelf(agent, the_farm, s) for s in the_farm.shelves]
    assert (first["current_species"], first["current_plant_count"]) == ("lettuce_butterhead", 15)
    assert (second["current_species"], second["current_plant_count"]) == ("lettuce_butterhead", 5)

    harvested = await put(agent, plan["id"], {"status": "harvested", "notes": "12 kg"})
    assert harvested["status"] == "harvested" and harvested["notes"] == "12 kg"
    assert ISO_MS_Z.match(harvested["ended_at"])
    for shelf_id in the_farm.shelves:
        shelf = await get_shelf(agent, the_farm, shelf_id)
        assert shelf["current_species"] is None and shelf["current_plant_count"] == 0


async def test_an_active_plan_created_at_once_occupies_and_cancel_clears(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 12)
    plan = await create(agent, plan_body(the_farm, status="active", plant_count=12))
    assert (await get_shelf(agent, the_farm, the_farm.shelves[0]))["current_plant_count"] == 12
    cancelled = await put(agent, plan["id"], {"status": "cancelled"})
    assert cancelled["status"] == "cancelled"
    assert (await get_shelf(agent, the_farm, the_farm.shelves[0]))["current_species"] is None


async def test_a_custom_species_carries_its_own_stages(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 50)
    body = plan_body(the_farm, species="shiso-red", species_name="Red shiso", stages=CUSTOM_STAGES)
    plan = await create(agent, body)
    assert plan["custom"] is True and plan["species_name"] == "Red shiso"
    assert plan["total_days"] == 10 and plan["stages"][1]["dli"] == 8.64

    missing = await create(agent, plan_body(the_farm, species="shiso-red"), expect=422)
    assert_error(missing, "VALIDATION_ERROR")
    assert error_fields(missing) == {"stages"}


async def test_invalid_transitions_are_409_and_change_nothing(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await create(agent, plan_body(the_farm))
    refused = await put(agent, plan["id"], {"status": "harvested"}, expect=409)
    assert_error(refused, "RESOURCE_EXISTS")
    assert refused["error"]["details"]["allowed"] == ["active", "cancelled"]
    await put(agent, plan["id"], {"status": "cancelled"})
    again = await put(agent, plan["id"], {"status": "active"}, expect=409)
    assert again["error"]["details"] == {
        "field": "status",
        "from": "cancelled",
        "to": "active",
        "allowed": [],
    }
    listed = await send(agent, "GET", f"/api/v1/grow-plans?farm_id={the_farm.id}", expect=200)
    assert [p["status"] for p in listed["grow_plans"]] == ["cancelled"]


async def test_an_active_plan_only_changes_status_and_notes(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await create(agent, plan_body(the_farm, status="active"))
    refused = await put(agent, plan["id"], {"plant_count": 11}, expect=409)
    assert refused["error"]["details"] == {"fields": ["plant_count"]}
    noted = await put(agent, plan["id"], {"notes": "thinned"})
    assert noted["notes"] == "thinned" and noted["plant_count"] == 10


async def test_a_planned_plan_can_be_edited(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20, 20)
    plan = await create(agent, plan_body(the_farm))
    edited = await put(
        agent,
        plan["id"],
        {"species": "basil_genovese", "shelf_ids": the_farm.shelves[1:], "plant_count": 18},
    )
    assert edited["species"] == "basil_genovese" and edited["species_name"] == "Basil, Genovese"
    assert edited["shelves"] == [{"shelf_id": the_farm.shelves[1], "plant_count": 18}]
    assert edited["total_days"] == 35 and edited["stages"][0]["temperature"]["target"] == 24.0


async def test_over_capacity_is_422(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 8, 4)
    body = plan_body(the_farm, shelf_ids=the_farm.shelves, plant_count=13, status="active")
    refused = await create(agent, body, expect=422)
    assert error_fields(refused) == {"plant_count"}
    listed = await send(agent, "GET", "/api/v1/grow-plans", expect=200)
    assert listed["total"] == 0


async def test_a_shelf_in_an_active_plan_is_409_and_nothing_changes(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20, 20)
    await create(agent, plan_body(the_farm, status="active"))
    second = await create(
        agent, plan_body(the_farm, shelf_ids=the_farm.shelves, species="kale", plant_count=20)
    )
    refused = await put(agent, second["id"], {"status": "active"}, expect=409)
    assert refused["error"]["details"]["shelf_id"] == the_farm.shelves[0]
    # The whole activation rolled back: the free shelf is still free, the plan still planned.
    assert (await get_shelf(agent, the_farm, the_farm.shelves[1]))["current_species"] is None
    assert (await get_shelf(agent, the_farm, the_farm.shelves[0]))["current_species"] == (
        "lettuce_butterhead"
    )
    plans = await send(agent, "GET", "/api/v1/grow-plans?status=planned", expect=200)
    assert [p["id"] for p in plans["grow_plans"]] == [second["id"]]


async def test_shelves_must_belong_to_the_farm(agent: Agent) -> None:
    north = await farm_with_shelves(agent, 20)
    south = await farm_with_shelves(agent, 20, name="South")
    refused = await create(agent, plan_body(north, shelf_ids=south.shelves), expect=422)
    assert error_fields(refused) == {"shelf_ids.0"}
    nowhere = await create(agent, plan_body(north, shelf_ids=[NOWHERE]), expect=422)
    assert error_fields(nowhere) == {"shelf_ids.0"}


async def test_bad_bodies_are_422(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    change: dict[str, Any]
    for change in (
        {"plant_count": 0},
        {"plant_count": "3"},
        {"shelf_ids": []},
        {"species": "Butter Head"},
        {"status": "harvested"},
        {"start_date": "yesterday"},
        {"colour": "green"},
    ):
        refused = await create(agent, plan_body(the_farm, **change), expect=422)
        assert_error(refused, "VALIDATION_ERROR")
    plan = await create(agent, plan_body(the_farm))
    await put(agent, plan["id"], {}, expect=422)
    await put(agent, plan["id"], {"status": "ripe"}, expect=422)
    await put(agent, plan["id"], {"notes": None}, expect=422)


async def test_list_filters_and_pages(agent: Agent) -> None:
    north = await farm_with_shelves(agent, 20, 20)
    south = await farm_with_shelves(agent, 20, name="South")
    first = await create(agent, plan_body(north, start_date="2026-01-01"))
    second = await create(
        agent, plan_body(north, shelf_ids=north.shelves[1:], start_date="2026-02-01")
    )
    third = await create(agent, plan_body(south, start_date="2026-03-01", status="active"))

    everything = await send(agent, "GET", "/api/v1/grow-plans", expect=200)
    assert set(everything) == {"grow_plans", "total", "limit", "offset"}
    assert [p["id"] for p in everything["grow_plans"]] == [third["id"], second["id"], first["id"]]

    async def ids(query: str) -> list[str]:
        body = await send(agent, "GET", f"/api/v1/grow-plans?{query}", expect=200)
        return [p["id"] for p in body["grow_plans"]]

    assert await ids(f"farm_id={north.id}") == [second["id"], first["id"]]
    assert await ids("status=active") == [third["id"]]
    assert await ids(f"shelf_id={north.shelves[1]}") == [second["id"]]
    assert await ids(f"farm_id={north.id}&status=active") == []
    page = await send(agent, "GET", "/api/v1/grow-plans?limit=1&offset=1", expect=200)
    assert [p["id"] for p in page["grow_plans"]] == [second["id"]] and page["total"] == 3
    await send(agent, "GET", "/api/v1/grow-plans?limit=0", expect=422)
    await send(agent, "GET", "/api/v1/grow-plans?farm_id=nope", expect=422)
    await send(agent, "GET", "/api/v1/grow-plans?status=ripe", expect=422)


async def test_roles_and_visibility(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await create(agent, plan_body(the_farm))
    reader = await make_user(agent, "user")
    operator = await make_user(agent, "operator")
    stranger = await make_user(agent, "operator")
    await grant(agent, reader, the_farm.id, "read_write")
    await grant(agent, operator, the_farm.id, "read_write")

    resp = await agent.client.get("/api/v1/grow-plans")
    assert resp.status == 401
    assert_error(await resp.json(), "UNAUTHORIZED")

    # A user may read plans but not change them.
    seen = await send(agent, "GET", "/api/v1/grow-plans", headers=reader.headers, expect=200)
    assert [p["id"] for p in seen["grow_plans"]] == [plan["id"]]
    path = f"/api/v1/grow-plans/{plan['id']}"
    refused = await send(agent, "PUT", path, {"notes": "x"}, headers=reader.headers, expect=403)
    assert_error(refused, "FORBIDDEN")
    await send(
        agent, "POST", "/api/v1/grow-plans", plan_body(the_farm), headers=reader.headers, expect=403
    )

    # An operator runs the crop cycle on a farm it may write.
    await send(agent, "PUT", path, {"status": "active"}, headers=operator.headers, expect=200)

    # A farm the caller may not see hides its plans: 404, never 403.
    hidden = await send(agent, "PUT", path, {"notes": "x"}, headers=stranger.headers, expect=404)
    assert_error(hidden, "RESOURCE_NOT_FOUND")
    await send(agent, "GET", f"{path}/progress", headers=stranger.headers, expect=404)
    await send(
        agent,
        "POST",
        "/api/v1/grow-plans",
        plan_body(the_farm),
        headers=stranger.headers,
        expect=404,
    )
    listed = await send(agent, "GET", "/api/v1/grow-plans", headers=stranger.headers, expect=200)
    assert listed["total"] == 0
    await put(agent, NOWHERE, {"notes": "x"}, expect=404)
    await send(agent, "PUT", "/api/v1/grow-plans/not-a-uuid", {"notes": "x"}, expect=422)


async def test_plans_are_synced_through_the_outbox(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await create(agent, plan_body(the_farm))
    await put(agent, plan["id"], {"status": "active"})
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT lane, op, payload FROM outbox WHERE kind = 'grow_plans' AND entity_id = ?"
        " ORDER BY seq",
        (plan["id"],),
    )
    assert [(r["lane"], r["op"]) for r in rows] == [(0, "upsert"), (0, "upsert")]
    first, last = (json.loads(r["payload"]) for r in rows)
    assert first["status"] == "planned" and last["status"] == "active"
    # The plan's shelves travel with it, already on the insert.
    assert first["shelves"] == [{"shelf_id": the_farm.shelves[0], "plant_count": 10}]
    assert last["stages"][0]["name"] == "germination"


async def test_two_status_changes_at_once_apply_one_and_refuse_the_other(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await send(agent, "POST", "/api/v1/grow-plans", plan_body(the_farm), expect=201)
    url = f"/api/v1/grow-plans/{plan['id']}"

    async def put(status: str) -> int:
        resp = await agent.client.put(url, json={"status": status}, headers=agent.auth())
        return resp.status

    statuses = await asyncio.gather(put("active"), put("cancelled"))
    assert sorted(statuses) == [200, 409]
    final = await send(agent, "GET", f"/api/v1/grow-plans?farm_id={the_farm.id}", expect=200)
    (stored,) = final["grow_plans"]
    occupied = (await get_shelf(agent, the_farm, the_farm.shelves[0]))["current_plant_count"]
    # The plan and its shelf agree, whichever change won.
    assert (stored["status"], occupied) in (("active", 10), ("cancelled", 0))


async def test_a_harvest_records_its_quantity_and_syncs_it(agent: Agent) -> None:
    the_farm = await farm_with_shelves(agent, 20)
    plan = await create(agent, plan_body(the_farm, status="active"))
    assert (plan["harvested_quantity"], plan["harvest_unit"]) == (None, None)
    for body in (
        {"harvested_quantity": 2.5, "harvest_unit": "kg"},  # without becoming harvested
        {"status": "harvested", "harvested_quantity": 2.5},  # no unit
        {"status": "harvested", "harvested_quantity": 0, "harvest_unit": "kg"},
        {"status": "harvested", "harvested_quantity": 2.5, "harvest_unit": "stone"},
    ):
        refused = await put(agent, plan["id"], body, expect=422)
        assert_error(refused, "VALIDATION_ERROR")
    harvested = await put(
        agent, plan["id"], {"status": "harvested", "harvested_quantity": 2.5, "harvest_unit": "kg"}
    )
    assert harvested["status"] == "harvested"
    assert (harvested["harvested_quantity"], harvested["harvest_unit"]) == (2.5, "kg")
    again = await put(
        agent,
        plan["id"],
        {"status": "harvested", "harvested_quantity": 9, "harvest_unit": "kg"},
        expect=409,
    )
    assert_error(again, "RESOURCE_EXISTS")
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT payload FROM outbox WHERE kind = 'grow_plans' AND entity_id = ? ORDER BY seq",
        (plan["id"],),
    )
    last = json.loads(rows[-1]["payload"])
    assert (last["status"], last["harvested_quantity"], last["harvest_unit"]) == (
        "harvested",
        2.5,
        "kg",
    )
