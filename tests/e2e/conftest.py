"""Fixtures for agent + cloud tests: a real cloud on the private PostgreSQL, served on a
loopback port that survives a stop and a restart (for outage tests)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from cloud.app import create_app
from cloud.settings import CloudSettings
from farmkit.passwords import hash_password
from tests.agent.notify.conftest import ntfy  # noqa: F401  (fixture: an ntfy receiver)
from tests.cloud.conftest import (  # noqa: F401  (fixtures)
    CloudDatabase,
    cloud_db,
    cloud_template,
    postgres_cluster,
)
from tests.support.postgres import PostgresCluster

CLOUD_PASSWORD = "cloud user password 123"


@dataclass
class LiveCloud:
    """A cloud app on 127.0.0.1:port that a test can stop and start again."""

    settings: CloudSettings
    db: CloudDatabase
    port: int
    runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Serve (again) on the same port."""
        self.runner = web.AppRunner(create_app(self.settings))
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        """Stop serving: the agent sees connection refused."""
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def add_user(self, role: str = "user", email: str | None = None) -> str:
        """A cloud user with CLOUD_PASSWORD; returns the id."""
        conn = await asyncpg.connect(self.db.superuser_dsn, timeout=10)
        try:
            user_id = await conn.fetchval(
                "INSERT INTO users (email, password_hash, role, email_verified)"
                " VALUES ($1, $2, $3, true) RETURNING id",
                email or f"{uuid.uuid4().hex[:8]}@cloud.test",
                hash_password(CLOUD_PASSWORD),
                role,
            )
        finally:
            await conn.close(timeout=10)
        return str(user_id)

    async def sql(self, query: str, *args: Any) -> Any:
        """Run one statement as the superuser (for the test's own set-up and checks)."""
        conn = await asyncpg.connect(self.db.superuser_dsn, timeout=10)
        try:
            return await conn.fetch(query, *args, timeout=30)
        finally:
            await conn.close(timeout=10)

    async def login(self, email: str, password: str = CLOUD_PASSWORD) -> str:
        """An access token of the cloud."""
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                self.url + "/api/v1/login", json={"email": email, "password": password}
            ) as resp,
        ):
            assert resp.status == 200, await resp.text()
            return str((await resp.json())["access_token"])

    async def create_agent_code(self, admin_token: str, owner_id: str) -> str:
        """An admin creates an agent; returns its pairing code."""
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                self.url + "/api/v1/agents",
                json={"name": "Greenhouse 1", "owner_id": owner_id},
                headers={"Authorization": f"Bearer {admin_token}"},
            ) as resp,
        ):
            assert resp.status == 201, await resp.text()
            return str((await resp.json())["pairing_code"])


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def cloud_overrides() -> dict[str, Any]:
    """Settings of the test cloud beyond the defaults below; a test module may override it."""
    return {}


@pytest.fixture
async def cloud(
    cloud_db: CloudDatabase,  # noqa: F811
    postgres_cluster: PostgresCluster,  # noqa: F811
    tmp_path: Path,
    cloud_overrides: dict[str, Any],
) -> AsyncIterator[LiveCloud]:
    """A running cloud on a fresh database; rate limits off (agents post often)."""
    settings = CloudSettings(
        owner_dsn=cloud_db.owner_dsn,
        app_dsn=cloud_db.app_dsn,
        sync_dsn=cloud_db.system_dsn,
        signing_key_path=tmp_path / "cloud_key.pem",
        rate_limit_per_user=0,
        rate_limit_per_premium_user=0,
        rate_limit_per_address=0,
        db_pool_max=4,
        admin_email=None,  # the tests make their own users
        **cloud_overrides,
    )
    live = LiveCloud(settings, cloud_db, _free_port())
    await live.start()
    try:
        yield live
    finally:
        await live.stop()
