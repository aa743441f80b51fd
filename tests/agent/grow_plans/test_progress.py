"""Progress over simulated days: day, stage, harvest date, adherence, the harvest notice."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.services.grow_plans.harvest_watch import HarvestWatch
from agent.store.grow_plans import GrowPlanStore
from agent.store.readings import NewReading, ReadingStore
from agent.web.keys import DATABASE, HARVEST_WATCH
from tests.agent.grow_plans.conftest import (
    DAY_S,
    Clock,
    PlanAgentFactory,
    farm_with_shelves,
    plan_body,
)
from tests.agent.hierarchy_helpers import add_device, send
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Agent

TEN_MINUTES_MS = 600_000
STAGES = [
    {
        "name": "rooting",
        "days": 2,
        "temperature": {"target": 22.0, "band": 1.0},
        "humidity": {"target": 60.0, "band": 5.0},
        "light_hours": 16,
        "ppfd": 150,
    },
    {
        "name": "leaf",
        "days": 3,
        "temperature": {"target": 18.0, "band": 1.0},
        "humidity": {"target": 70.0, "band": 5.0},
        "light_hours": 16,
        "ppfd": 250,
    },
]


def midnight(moment: float) -> float:
    """Start of the UTC day holding ``moment``."""
    return moment - moment % DAY_S


async def login(agent: Agent) -> None:
    """Log the admin in again (tokens expire as the simulated days pass)."""
    resp = await agent.client.post(
        "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
    )
    assert resp.status == 200, await resp.text()
    agent.admin_token = (await resp.json())["access_token"]


async def record(
    agent: Agent, device_id: str, metric: str, start_s: float, hours: float, value: float
) -> None:
    """Store a reading every ten minutes for ``hours`` from ``start_s``."""
    first = int(start_s * 1000)
    readings = [
        NewReading(device_id, metric, "", first + i * TEN_MINUTES_MS, value)
        for i in range(int(hours * 6))
    ]
    await ReadingStore(agent.client.app[DATABASE]).write(readings)


async def progress(agent: Agent, plan_id: str) -> dict[str, Any]:
    """GET the plan's progress as the admin."""
    result: dict[str, Any] = await send(
        agent, "GET", f"/api/v1/grow-plans/{plan_id}/progress", expect=200
    )
    return result


async def test_progress_through_simulated_days(plan_agent: Agent, clock: Clock) -> None:
    agent = plan_agent
    day_one = midnight(clock.now)
    clock.now = day_one + 12 * 3600
    await login(agent)
    the_farm = await farm_with_shelves(agent, 50)
    elsewhere = await farm_with_shelves(agent, 50, name="South")
    sensor = await add_device(agent, the_farm.id, "Climate", "temperature_humidity")
    other = await add_device(agent, elsewhere.id, "Other", "temperature_humidity")
    start = datetime.fromtimestamp(day_one, UTC).date()
    body = plan_body(
        the_farm,
        species="test-greens",
        stages=STAGES,
        start_date=start.isoformat(),
        status="active",
    )
    plan = await send(agent, "POST", "/api/v1/grow-plans", body, expect=201)

    first = await progress(agent, plan["id"])
    assert set(first) == {
        "plan_id",
        "farm_id",
        "status",
        "as_of",
        "day",
        "total_days",
        "percent",
        "current_stage",
        "current_stage_index",
        "stage_day",
        "days_to_harvest",
        "expected_harvest_date",
        "harvest_ready",
        "stages",
    }
    assert (first["day"], first["current_stage"], first["stage_day"]) == (1, "rooting", 1)
    assert first["percent"] == 10.0 and first["days_to_harvest"] == 4
    assert first["expected_harvest_date"] == (start + timedelta(days=4)).isoformat()
    assert [s["state"] for s in first["stages"]] == ["current", "upcoming"]
    no_data = first["stages"][0]["adherence"]["temperature"]
    assert no_data["in_band"] is None and no_data["coverage"] == 0.0
    assert first["stages"][1]["adherence"] is None

    # Day 1: 18 hours in band, then 6 hours too warm; humidity in band all day. Day 2: no data.
    await record(agent, sensor, "temperature", day_one, 18, 22.4)
    await record(agent, sensor, "temperature", day_one + 18 * 3600, 6, 25.0)
    await record(agent, sensor, "humidity", day_one, 24, 61.0)
    # Day 3 (the leaf stage), the first 12 hours: temperature in band, humidity far too high.
    await record(agent, sensor, "temperature", day_one + 2 * DAY_S, 12, 18.5)
    await record(agent, sensor, "humidity", day_one + 2 * DAY_S, 12, 90.0)
    # Another farm's sensor, way out of band, counts for nothing here.
    await record(agent, other, "temperature", day_one, 60, 40.0)

    clock.advance(2 * DAY_S)  # day 3, noon
    await login(agent)
    third = await progress(agent, plan["id"])
    assert (third["day"], third["current_stage"], third["stage_day"]) == (3, "leaf", 1)
    assert third["current_stage_index"] == 1
    assert third["percent"] == 50.0 and third["days_to_harvest"] == 2
    assert third["harvest_ready"] is False
    rooting, leaf = third["stages"]
    assert rooting["state"] == "done" and leaf["state"] == "current"
    assert rooting["end_date"] == (start + timedelta(days=1)).isoformat()
    temperature = rooting["adherence"]["temperature"]
    assert temperature["in_band"] == pytest.approx(0.75)
    assert temperature["coverage"] == pytest.approx(0.5)  # one day of two had readings
    assert (temperature["target"], temperature["band"]) == (22.0, 1.0)
    assert rooting["adherence"]["humidity"]["in_band"] == pytest.approx(1.0)
    assert leaf["adherence"]["temperature"]["in_band"] == pytest.approx(1.0)
    assert leaf["adherence"]["temperature"]["coverage"] == pytest.approx(1.0)
    assert leaf["adherence"]["humidity"]["in_band"] == pytest.approx(0.0)
    assert leaf["adherence"]["humidity"]["resolution"] in {"raw", "1m", "1h"}

    # Past the last day the plan is harvest-ready; harvesting freezes its progress.
    clock.advance(2 * DAY_S)
    await login(agent)
    last = await progress(agent, plan["id"])
    assert (last["day"], last["days_to_harvest"], last["harvest_ready"]) == (5, 0, True)
    path = f"/api/v1/grow-plans/{plan['id']}"
    harvested = await send(agent, "PUT", path, {"status": "harvested"}, expect=200)
    clock.advance(10 * DAY_S)
    await login(agent)
    frozen = await progress(agent, plan["id"])
    assert frozen["status"] == "harvested" and frozen["day"] == 5
    assert frozen["harvest_ready"] is False and frozen["as_of"] == harvested["ended_at"]


async def test_a_planned_plan_has_no_adherence_yet(plan_agent: Agent, clock: Clock) -> None:
    the_farm = await farm_with_shelves(plan_agent, 50)
    tomorrow = datetime.fromtimestamp(clock.now + DAY_S, UTC).date()
    body = plan_body(the_farm, start_date=tomorrow.isoformat())
    plan = await send(plan_agent, "POST", "/api/v1/grow-plans", body, expect=201)
    before = await progress(plan_agent, plan["id"])
    assert (before["day"], before["percent"], before["current_stage"]) == (0, 0.0, None)
    assert before["days_to_harvest"] == 35
    assert all(s["state"] == "upcoming" and s["adherence"] is None for s in before["stages"])


async def test_harvest_ready_is_noticed_once_per_plan(plan_agent: Agent, clock: Clock) -> None:
    agent = plan_agent
    the_farm = await farm_with_shelves(agent, 50, 50)
    today = datetime.fromtimestamp(clock.now, UTC).date()
    ripe = await send(
        agent,
        "POST",
        "/api/v1/grow-plans",
        plan_body(
            the_farm,
            species="microgreens_radish",
            status="active",
            start_date=(today - timedelta(days=8)).isoformat(),
        ),
        expect=201,
    )
    await send(
        agent,
        "POST",
        "/api/v1/grow-plans",
        plan_body(
            the_farm,
            shelf_ids=the_farm.shelves[1:],
            species="microgreens_radish",
            status="active",
            start_date=(today - timedelta(days=7)).isoformat(),
        ),
        expect=201,
    )
    notices: list[tuple[str, str, Mapping[str, object]]] = []

    async def on_notice(farm_id: str, kind: str, data: Mapping[str, object]) -> None:
        notices.append((farm_id, kind, data))

    watch = HarvestWatch(
        GrowPlanStore(agent.client.app[DATABASE]), on_notice, now=clock, zone=UTC, interval_s=3600
    )
    # Radish microgreens take 9 days: the plan started 8 days ago is on its last day today.
    assert await watch.check() == 1
    assert notices == [
        (
            the_farm.id,
            "harvest_ready",
            {
                "grow_plan_id": ripe["id"],
                "species": "microgreens_radish",
                "species_name": "Microgreens, radish",
                "start_date": ripe["start_date"],
                "total_days": 9,
            },
        )
    ]
    assert await watch.check() == 0
    # The agent's own watch shares the record: the notice is not sent twice.
    assert await agent.client.app[HARVEST_WATCH].check() == 0

    clock.advance(DAY_S)
    assert await watch.check() == 1
    assert await watch.check() == 0
    listed = await send(agent, "GET", "/api/v1/grow-plans?status=active", expect=200)
    assert all(p["harvest_notified_at"] is not None for p in listed["grow_plans"])


async def test_plan_days_follow_the_farm_time_zone(
    make_plan_agent: PlanAgentFactory, clock: Clock
) -> None:
    # Kiritimati is UTC+14: at 12:00 UTC it is already 02:00 the next day there.
    clock.now = midnight(clock.now) + 12 * 3600
    agent = await make_plan_agent(timezone="Pacific/Kiritimati")
    the_farm = await farm_with_shelves(agent, 50)
    plan = await send(agent, "POST", "/api/v1/grow-plans", plan_body(the_farm), expect=201)
    utc_today = datetime.fromtimestamp(clock.now, UTC).date()
    assert plan["start_date"] == (utc_today + timedelta(days=1)).isoformat()
    first = await progress(agent, plan["id"])
    assert first["day"] == 1 and first["percent"] == pytest.approx(100 * 2 / (35 * 24), abs=0.1)
