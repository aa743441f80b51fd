"""A live agent on a private Mosquitto, as the control tests use it; an agent on the fake hub."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from integrations.home_assistant.fake import FakeHub
from tests.agent.control.conftest import broker, rig
from tests.conftest import Agent
from tests.support.hub_fixtures import TOKEN, hub, serve

__all__ = ["BASE", "TOKEN", "assign", "broker", "hub", "hub_agent", "rig", "serve"]

BASE = "/api/v1/home-automation"


@pytest.fixture
async def hub_agent(
    make_agent: Callable[..., Awaitable[Agent]],
    hub: FakeHub,
    serve: Callable[[web.Application], Awaitable[str]],
) -> Agent:
    url = await serve(hub.app())
    return await make_agent(
        home_automation_enabled=True, home_automation_url=url, home_automation_token=TOKEN
    )


async def assign(agent: Agent, entity_id: str, farm_id: str) -> None:
    """Assign a hub entity to a farm, as an admin does (it is of no farm until then)."""
    resp = await agent.client.put(
        f"{BASE}/entities/{entity_id}", json={"farm_id": farm_id}, headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
