"""An agent whose mail is captured and whose clock the test moves (for TOTP codes)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientResponse

from agent.app import create_app
from farmkit.mail import MailMessage
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Agent, agent_settings

PASSWORD = "a long enough password"


class CapturedMail:
    """A MailSender that keeps messages for the test to read."""

    def __init__(self) -> None:
        self.messages: list[MailMessage] = []

    async def send(self, message: MailMessage) -> None:
        self.messages.append(message)

    def token_to(self, address: str) -> str:
        """The token (last line) of the newest message to ``address``."""
        mine = [m for m in self.messages if m.to == address]
        assert mine, f"no mail to {address}"
        return mine[-1].body.strip().splitlines()[-1]


class Clock:
    """Real time plus an offset the test advances."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def mail() -> CapturedMail:
    return CapturedMail()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def make_agent(
    aiohttp_client: Any, tmp_path: Path, mail: CapturedMail, clock: Clock
) -> Callable[..., Any]:
    """Like the shared fixture, with captured mail and a movable clock."""

    async def start(**overrides: Any) -> Agent:
        app = create_app(agent_settings(tmp_path / "state", **overrides), mail=mail, clock=clock)
        client = await aiohttp_client(app)
        resp = await client.post(
            "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert resp.status == 200, await resp.text()
        return Agent(client, (await resp.json())["access_token"])

    return start


@pytest.fixture
async def agent(make_agent: Callable[..., Any]) -> Agent:
    result: Agent = await make_agent()
    return result


async def error_of(resp: ClientResponse, status: int) -> dict[str, Any]:
    """Assert an error status and return the envelope's ``error`` object."""
    body = await resp.json()
    assert resp.status == status, body
    assert body["success"] is False
    error: dict[str, Any] = body["error"]
    return error


async def create_user(
    agent: Agent,
    role: str = "user",
    *,
    email: str | None = None,
    password: str = PASSWORD,
    farms_access: list[str] | None = None,
) -> dict[str, Any]:
    """Create a user through the admin API and return it."""
    body = {
        "email": email or f"{role}-{uuid.uuid4().hex[:8]}@farm.test",
        "password": password,
        "role": role,
        "farms_access": farms_access or [],
    }
    resp = await agent.client.post("/api/v1/users/", json=body, headers=agent.auth())
    assert resp.status == 201, await resp.text()
    user: dict[str, Any] = await resp.json()
    return user


async def login(agent: Agent, email: str, password: str = PASSWORD) -> ClientResponse:
    """POST /api/v1/login."""
    return await agent.client.post("/api/v1/login", json={"email": email, "password": password})


async def tokens_of(agent: Agent, email: str, password: str = PASSWORD) -> dict[str, Any]:
    """Log in (asserting success) and return the login result."""
    resp = await login(agent, email, password)
    result: dict[str, Any] = await resp.json()
    assert resp.status == 200, result
    return result


async def create_farm(agent: Agent, name: str = "North", token: str | None = None) -> str:
    """Create a farm and return its id."""
    resp = await agent.client.post("/api/v1/farms/", json={"name": name}, headers=agent.auth(token))
    assert resp.status == 201, await resp.text()
    farm_id: str = (await resp.json())["id"]
    return farm_id


async def events(agent: Agent, kind: str) -> list[dict[str, Any]]:
    """Authentication events of ``kind``, newest first."""
    resp = await agent.client.get(f"/api/v1/auth-events?kind={kind}", headers=agent.auth())
    assert resp.status == 200, await resp.text()
    found: list[dict[str, Any]] = (await resp.json())["auth_events"]
    return found
