"""A running cloud app on a fresh migrated database, and a world of users and farms.

- `make_cloud(**overrides)`: start the cloud on `cloud_db` with settings overrides.
- `cloud`: a cloud on default test settings (rate limits lifted).
- `world`: two farms and six users, each role and permission kind, with real password hashes,
  written through the system role as the sync would.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from cloud.app import create_app
from cloud.settings import CloudSettings
from farmkit.passwords import hash_password
from tests.cloud import conftest as cloud_conftest
from tests.cloud.conftest import CloudDatabase
from tests.cloud.seed import FarmTree, add_farm_tree, add_user, grant

# The fake hub's fixtures, for the home-automation tests (re-exported: pytest finds them here).
from tests.support.hub_fixtures import hub as hub
from tests.support.hub_fixtures import serve as serve

Conn: TypeAlias = "asyncpg.Connection[Any]"

# tests/cloud/users imports the fixtures it uses from here; `system` is the cloud tests' own.
system = cloud_conftest.system
PASSWORD = "correct horse battery staple"


def cloud_settings(cloud_db: CloudDatabase, key_path: Path, **overrides: Any) -> CloudSettings:
    """Settings for a test cloud on `cloud_db`, with generous rate limits."""
    values: dict[str, Any] = {
        "owner_dsn": cloud_db.owner_dsn,
        "app_dsn": cloud_db.app_dsn,
        "sync_dsn": cloud_db.system_dsn,
        "signing_key_path": key_path,
        "db_pool_max": 4,
        "rate_limit_per_user": 100_000,
        "rate_limit_per_premium_user": 100_000,
        "rate_limit_per_address": 100_000,
        "admin_email": None,  # the tests make their own users
    }
    values.update(overrides)
    return CloudSettings(**values)


@dataclass
class Cloud:
    """A running cloud under test."""

    client: TestClient[Any, Any]
    settings: CloudSettings

    async def login(self, email: str, password: str = PASSWORD) -> str:
        """Log in through the API; return the access token."""
        resp = await self.client.post("/api/v1/login", json={"email": email, "password": password})
        assert resp.status == 200, await resp.text()
        token: str = (await resp.json())["access_token"]
        return token

    async def get(self, path: str, token: str, **params: Any) -> tuple[int, Any]:
        """GET with a bearer token; return status and JSON body."""
        resp = await self.client.get(
            path, params=params, headers={"Authorization": f"Bearer {token}"}
        )
        return resp.status, await resp.json()


@pytest.fixture(scope="session")
def password_hash() -> str:
    """One Argon2id hash of PASSWORD for every test user (hashing is deliberately slow)."""
    return hash_password(PASSWORD)


@pytest.fixture
async def make_cloud(
    cloud_db: CloudDatabase,
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
    tmp_path: Path,
) -> AsyncIterator[Callable[..., Awaitable[Cloud]]]:
    """Start a cloud with optional settings overrides.

    `cloud_db` comes before `aiohttp_client` so that the app stops before its database is
    dropped (fixtures are torn down in reverse order).
    """

    # Quotas count per minute of the clock. A test counting requests against one, run in the
    # last moments of a minute, straddled two windows and saw its last request allowed: its
    # clouds run on real time moved back to a second into this minute, all the same minute.
    offset = time.time() % 60 - 1

    def minute_start_clock() -> float:
        return time.time() - offset

    async def start(**overrides: Any) -> Cloud:
        settings = cloud_settings(cloud_db, tmp_path / "signing_key.pem", **overrides)
        limited = any(key.startswith("rate_limit") and value for key, value in overrides.items())
        app = create_app(settings, clock=minute_start_clock) if limited else create_app(settings)
        client = await aiohttp_client(app)
        return Cloud(client, settings)

    yield start


@pytest.fixture
async def cloud(make_cloud: Callable[..., Awaitable[Cloud]]) -> Cloud:
    """A cloud on default test settings."""
    return await make_cloud()


@dataclass(frozen=True)
class World:
    """Users by what they may see, and two farms."""

    users: dict[str, UUID]
    farm_a: FarmTree  # created by alice; rita reads it, will writes it
    farm_b: FarmTree  # created by bob

    @staticmethod
    def email(name: str) -> str:
        return f"{name}@example.com"


USERS = {
    "admin": "admin",  # sees everything
    "alice": "farm_manager",  # creator of farm A
    "bob": "farm_manager",  # creator of farm B
    "rita": "user",  # read_only on farm A
    "will": "operator",  # read_write on farm A
    "nora": "analyst",  # no permission at all
}


@pytest.fixture
async def world(system: Conn, password_hash: str) -> World:
    """Two farms, six users, the permissions of USERS."""
    async with system.transaction():
        users = {}
        for name, role in USERS.items():
            users[name] = await add_user(system, World.email(name), role)
        await system.execute("UPDATE users SET password_hash = $1", password_hash)
        farm_a = await add_farm_tree(system, users["alice"], "Alice's farm")
        farm_b = await add_farm_tree(system, users["bob"], "Bob's farm")
        await grant(system, users["rita"], farm_a.farm_id, "read_only", users["admin"])
        await grant(system, users["will"], farm_a.farm_id, "read_write", users["admin"])
    return World(users, farm_a, farm_b)


def expected_farms(world: World) -> dict[str, set[str]]:
    """Which farms each user may see (docs/design.md section 4)."""
    a, b = str(world.farm_a.farm_id), str(world.farm_b.farm_id)
    return {
        "admin": {a, b},
        "alice": {a},
        "bob": {b},
        "rita": {a},
        "will": {a},
        "nora": set(),
    }


def assert_error(body: Any, code: str) -> None:
    """The body is the error envelope of docs/design.md section 3 with ``code``."""
    assert body["success"] is False
    assert body["error"]["code"] == code
    assert set(body) == {"success", "error", "timestamp", "request_id"}
    assert set(body["error"]) == {"code", "message", "details"}
