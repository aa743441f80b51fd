"""A real agent on a clock the test moves, and a farm with shelves to plant."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.app import create_app
from tests.agent.hierarchy_helpers import farm, rack, row, send, shelf
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Agent, agent_settings
from tests.support.clock import Clock

DAY_S = 86_400.0


@pytest.fixture
def clock() -> Clock:
    """The agent's clock."""
    return Clock()


PlanAgentFactory = Callable[..., Awaitable[Agent]]


@pytest.fixture
def make_plan_agent(aiohttp_client: Any, tmp_path: Path, clock: Clock) -> PlanAgentFactory:
    """Start an agent on ``clock`` whose harvest check runs only when a test calls it."""

    async def start(**overrides: Any) -> Agent:
        settings = agent_settings(
            tmp_path / "state", grow_plan_check_interval_s=3600.0, **overrides
        )
        client = await aiohttp_client(create_app(settings, clock=clock))
        resp = await client.post(
            "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert resp.status == 200, await resp.text()
        return Agent(client, (await resp.json())["access_token"])

    return start


@pytest.fixture
async def plan_agent(make_plan_agent: PlanAgentFactory) -> Agent:
    """An agent on ``clock`` with default settings (UTC)."""
    return await make_plan_agent()


@dataclass
class Farm:
    """A farm with one rack of shelves."""

    id: str
    rack_id: str
    shelves: list[str]


async def farm_with_shelves(agent: Agent, *capacities: int, name: str = "North") -> Farm:
    """A farm with one shelf per capacity given, on one rack."""
    made = await farm(agent, name)
    the_row = await row(agent, made["id"], 0)
    the_rack = await rack(agent, the_row["id"], 0)
    shelves = [
        (await shelf(agent, the_rack["id"], level, plant_capacity=capacity))["id"]
        for level, capacity in enumerate(capacities)
    ]
    return Farm(made["id"], the_rack["id"], shelves)


FarmFactory = Callable[..., Awaitable[Farm]]


def plan_body(the_farm: Farm, **fields: Any) -> dict[str, Any]:
    """A valid POST /grow-plans body: butterhead lettuce on the farm's first shelf."""
    body: dict[str, Any] = {
        "farm_id": the_farm.id,
        "shelf_ids": the_farm.shelves[:1],
        "species": "lettuce_butterhead",
        "plant_count": 10,
    }
    body.update(fields)
    return body


async def get_shelf(agent: Agent, the_farm: Farm, shelf_id: str) -> dict[str, Any]:
    """A shelf of the farm as the API lists it."""
    body = await send(agent, "GET", f"/api/v1/shelves/?rack_id={the_farm.rack_id}", expect=200)
    found: dict[str, Any] = next(s for s in body["shelves"] if s["id"] == shelf_id)
    return found
