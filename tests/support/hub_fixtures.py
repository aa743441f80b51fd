"""The fake hub served for async tests: ``serve`` puts any aiohttp app on a free port and ``hub``
is the sample hub answering ``TOKEN`` (agent, cloud and hub-client tests share them)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from integrations.home_assistant.fake import FakeHub

__all__ = ["TOKEN", "Serve", "hub", "serve"]

TOKEN = "hub-token-secret-123"

Serve = Callable[[web.Application], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start apps on free ports until the test ends; each call answers the app's base URL."""
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
    """The fake hub with its sample entities, answering the token ``TOKEN``."""
    return FakeHub.sample(TOKEN)
