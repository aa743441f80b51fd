"""A live agent on a private Mosquitto, as the control tests use it; an agent on the fake hub."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from home_hub.fake import FakeHub
from tests.agent.control.conftest import broker, rig
from tests.conftest import Agent

__all__ = ["BASE", "TOKEN", "broker", "hub", "hub_agent", "rig", "serve"]

TOKEN = "hub-token-secret-123"
BASE = "/api/v1/home-automation"


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[web.Application], Awaitable[str]]]:
    servers: list[TestServer] = []

    async def start(app: web.Application) -> str:
        server = TestServer(app)
        await server.start_server()
        servers.append(server)
        return str(server.make_url("/")).rstrip("/")

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
def hub() -> FakeHub:
    return FakeHub.sample(TOKEN)


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
