"""A real agent on a real TCP port (aiohttp's test server) for the client library's tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agent.app import create_app
from agent.settings import AgentSettings
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, agent_settings


@dataclass
class ServedAgent:
    """Where the agent listens, its app (for the event fan-out) and its settings."""

    base_url: str
    app: web.Application
    settings: AgentSettings
    server: TestServer

    def drop_connections(self) -> None:
        """Cut every open TCP connection to the agent, as a network failure would."""
        assert self.server.handler is not None
        for handler in self.server.handler.connections:
            if handler.transport is not None:
                handler.transport.abort()

    def requests_served(self) -> int:
        """Requests (WebSocket upgrades included) the agent has taken so far."""
        assert self.server.handler is not None
        return self.server.handler.requests_count

    async def admin_login(self) -> dict[str, Any]:
        """Log the admin in over HTTP; the LoginResult as JSON."""
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                self.base_url + "/api/v1/login",
                json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD},
            ) as resp,
        ):
            assert resp.status == 200, await resp.text()
            body: dict[str, Any] = await resp.json()
            return body

    async def api_key(self) -> str:
        """A fresh API key of the admin."""
        login = await self.admin_login()
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                self.base_url + "/api/v1/api-keys",
                json={"user_id": login["user"]["id"], "name": "client tests"},
                headers={"Authorization": f"Bearer {login['access_token']}"},
            ) as resp,
        ):
            assert resp.status == 201, await resp.text()
            return str((await resp.json())["key"])


ServeAgent = Callable[..., Awaitable[ServedAgent]]


@pytest.fixture
async def serve_agent(aiohttp_server: Any, tmp_path: Path) -> ServeAgent:
    """Start an agent on 127.0.0.1 with optional settings overrides."""

    async def start(**overrides: Any) -> ServedAgent:
        settings = agent_settings(tmp_path / "state", **overrides)
        app = create_app(settings)
        server = await aiohttp_server(app, host="127.0.0.1")
        return ServedAgent(str(server.make_url("")).rstrip("/"), app, settings, server)

    return start


@pytest.fixture
async def served(serve_agent: ServeAgent) -> ServedAgent:
    """An agent on default test settings."""
    return await serve_agent()


ADMIN: dict[str, Any] = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
