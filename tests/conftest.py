"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from agent.app import create_app
from agent.settings import AgentSettings
from tests.support.accounts import ADMIN_EMAIL as ADMIN_EMAIL
from tests.support.accounts import ADMIN_PASSWORD as ADMIN_PASSWORD


def agent_settings(state_dir: Path, **overrides: Any) -> AgentSettings:
    """Settings for a test agent: its own state directory, generous rate limits, and no device
    transports (tests of the live runtime turn MQTT and serial on with a private broker)."""
    values: dict[str, Any] = {
        "mqtt_enabled": False,
        "serial_enabled": False,
        "state_dir": state_dir,
        "admin_email": ADMIN_EMAIL,
        "admin_password": ADMIN_PASSWORD,
        "rate_limit_per_user": 100_000,
        "rate_limit_per_premium_user": 100_000,
        "rate_limit_per_address": 100_000,
        "login_failures_per_address": 1_000,
        # The test machine's own clock is set, whatever its kernel says (no NTP in a container);
        # the clock's tests name a flag file instead (issue 30).
        "clock_sync_source": "assume",
        # Readings reach the API as soon as with a tablet watching (no 2 s batches at night).
        "reading_unwatched_batch_interval_s": 0.75,
    }
    values.update(overrides)
    return AgentSettings(**values)


@dataclass
class Agent:
    """A running agent under test with an admin logged in."""

    client: TestClient[Any, Any]
    admin_token: str

    def auth(self, token: str | None = None) -> dict[str, str]:
        """Authorization header for ``token`` (the admin's by default)."""
        return {"Authorization": f"Bearer {token or self.admin_token}"}


AgentFactory = Callable[..., Any]


@pytest.fixture
async def make_agent(aiohttp_client: Any, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start an agent with optional settings overrides; returns an :class:`Agent`."""

    async def start(**overrides: Any) -> Agent:
        app = create_app(agent_settings(tmp_path / "state", **overrides))
        client = await aiohttp_client(app)
        resp = await client.post(
            "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert resp.status == 200, await resp.text()
        return Agent(client, (await resp.json())["access_token"])

    yield start


@pytest.fixture
async def agent(make_agent: Callable[..., Any]) -> Agent:
    """An agent on default test settings."""
    result: Agent = await make_agent()
    return result
