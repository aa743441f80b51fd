"""A cloud with a captured mailbox and one user, for the identity flow tests.

- `outbox`: every mail the cloud sends; `outbox.token(email)` is the token of the latest one.
- `make_cloud(**overrides)`: start the cloud on `cloud_db` with settings overrides.
- `cloud`: a cloud on default test settings; `system`: a system-role connection.
- `user`: an active account (role user) with PASSWORD.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from cloud.app import create_app
from farmkit.mail import MailMessage
from farmkit.passwords import hash_password
from tests.cloud.api.conftest import PASSWORD, Cloud, Conn, cloud_settings
from tests.cloud.conftest import CloudDatabase
from tests.cloud.seed import add_user

__all__ = ["PASSWORD", "Cloud", "Conn", "Outbox", "User", "error_of", "login"]

EMAIL = "grace@example.com"


@dataclass
class Outbox:
    """A mail sender that keeps every message."""

    messages: list[MailMessage] = field(default_factory=list)

    async def send(self, message: MailMessage) -> None:
        self.messages.append(message)

    def token(self, to: str) -> str:
        """The token (last line) of the latest message to ``to``."""
        mine = [m for m in self.messages if m.to == to]
        assert mine, f"no mail to {to}"
        return mine[-1].body.strip().splitlines()[-1]


@dataclass(frozen=True)
class User:
    """A test account."""

    id: UUID
    email: str


@pytest.fixture(scope="session")
def password_hash() -> str:
    """One Argon2id hash of PASSWORD (hashing is deliberately slow)."""
    return hash_password(PASSWORD)


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
async def make_cloud(
    cloud_db: CloudDatabase,
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
    tmp_path: Path,
    outbox: Outbox,
) -> AsyncIterator[Callable[..., Awaitable[Cloud]]]:
    """Start a cloud with optional settings overrides; its mail goes to `outbox`."""

    async def start(clock: Callable[[], float] = time.time, **overrides: Any) -> Cloud:
        settings = cloud_settings(cloud_db, tmp_path / "signing_key.pem", **overrides)
        client = await aiohttp_client(create_app(settings, clock=clock, mail=outbox))
        return Cloud(client, settings)

    yield start


@pytest.fixture
async def cloud(make_cloud: Callable[..., Awaitable[Cloud]]) -> Cloud:
    return await make_cloud()


@pytest.fixture
async def user(system: Conn, password_hash: str) -> User:
    """An active account with PASSWORD and its address verified (mail is configured here: an
    unverified account does not sign in)."""
    user_id = await add_user(system, EMAIL)
    await system.execute(
        "UPDATE users SET password_hash = $1, email_verified = true WHERE id = $2",
        password_hash,
        user_id,
    )
    return User(user_id, EMAIL)


async def login(cloud: Cloud, email: str, password: str = PASSWORD) -> ClientResponse:
    """POST /auth/login."""
    return await cloud.client.post("/auth/login", json={"email": email, "password": password})


async def error_of(resp: ClientResponse, status: int) -> dict[str, Any]:
    """Assert the status and the error envelope; return its ``error``."""
    body = await resp.json()
    assert resp.status == status, body
    assert body["success"] is False
    error: dict[str, Any] = body["error"]
    return error


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
