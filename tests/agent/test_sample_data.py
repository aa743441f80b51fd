"""--sample-data: the demo's farm appears once, with metrics computed from its hierarchy."""

from __future__ import annotations

from tests.conftest import Agent, AgentFactory


async def _farms(agent: Agent) -> dict[str, object]:
    resp = await agent.client.get("/api/v1/farms/", headers=agent.auth())
    assert resp.status == 200
    body: dict[str, object] = await resp.json()
    return body


async def test_sample_farm_is_created_with_its_hierarchy(make_agent: AgentFactory) -> None:
    agent: Agent = await make_agent(sample_data=True)
    body = await _farms(agent)
    assert body["total"] == 1
    (farm,) = body["farms"]  # type: ignore[misc]
    assert farm["name"] == "Greenhouse One"
    metrics = farm["metrics"]
    assert (metrics["total_rows"], metrics["total_racks"], metrics["total_shelves"]) == (2, 3, 8)
    assert metrics["active_plants"] == 36 + 36 + 24 + 30 + 40 + 120 + 16


async def test_sample_data_is_not_created_twice(make_agent: AgentFactory) -> None:
    first: Agent = await make_agent(sample_data=True)
    await first.client.close()
    again: Agent = await make_agent(sample_data=True)
    assert (await _farms(again))["total"] == 1


async def test_no_sample_farm_unless_asked(agent: Agent) -> None:
    assert (await _farms(agent))["total"] == 0


async def test_sample_shelves_count_their_levels_from_the_bottom(make_agent: AgentFactory) -> None:
    agent = await make_agent(sample_data=True)
    farms = await (await agent.client.get("/api/v1/farms/", headers=agent.auth())).json()
    farm_id = farms["farms"][0]["id"]
    rows = await (
        await agent.client.get(f"/api/v1/rows/?farm_id={farm_id}", headers=agent.auth())
    ).json()
    row_a = next(r for r in rows["rows"] if r["name"].startswith("Row A"))
    racks = await (
        await agent.client.get(f"/api/v1/racks/?row_id={row_a['id']}", headers=agent.auth())
    ).json()
    rack = next(r for r in racks["racks"] if r["name"] == "Rack A1")
    shelves = await (
        await agent.client.get(f"/api/v1/shelves/?rack_id={rack['id']}", headers=agent.auth())
    ).json()
    levels = {s["name"]: s["level"] for s in shelves["shelves"]}
    assert levels == {"A1 low": 0, "A1 middle": 1, "A1 top": 2}
