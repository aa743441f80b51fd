"""--sample-data: the demo's farm appears once, with metrics computed from its hierarchy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

from tests.conftest import Agent, AgentFactory
from tests.support.agent_process import AgentProcess


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


async def test_the_demo_starts_with_a_week_of_history_for_its_charts(tmp_path: Path) -> None:
    """`scripts/demo`'s first start: every simulated sensor has a week behind it, at every
    resolution a chart asks for (raw, 1-minute and hourly rollups)."""
    demo = AgentProcess(tmp_path / "state-demo", {}, args=("--sample-data", "--simulate"))
    await demo.start()
    try:
        sensors = (await demo.get("/api/v1/sensors"))["sensors"]
        assert {s["name"] for s in sensors} >= {"Rack A1 climate", "Tank pH", "Tank EC"}
        now = datetime.now(UTC)
        for sensor in sensors:
            for days, max_points in ((1, 2000), (7, 400), (365, 400)):
                start = (now - timedelta(days=days)).isoformat()
                query = urlencode(
                    {"start": start, "end": now.isoformat(), "max_points": max_points}
                )
                data = await demo.get(f"/api/v1/sensors/{sensor['id']}/data?{query}")
                for series in data["series"]:
                    stamps = [datetime.fromisoformat(p["timestamp"]) for p in series["points"]]
                    assert stamps, (sensor["name"], series["metric"], data["resolution"])
                    covered = max(stamps) - min(stamps)
                    assert covered >= timedelta(days=min(days, 7) - 1), (
                        sensor["name"],
                        series["metric"],
                        data["resolution"],
                        covered,
                    )
    finally:
        demo.stop()
