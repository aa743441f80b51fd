"""A cloud wired to the in-repo fake POS provider, and two owners who each connect a shop.

- `fake`: the fake provider's account (`FakeMerchant.sample()`), served on a local port.
- `pos_cloud(**overrides)`: a running cloud whose sandbox URL is the fake.
- `owners`: alice and bob (farm managers) and nora (an analyst), logged in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from aiohttp.test_utils import TestServer

from cloud.pos_provider.fake import FakeMerchant, fake_app
from farmkit.secretbox import new_key_text
from tests.cloud.api.conftest import (  # noqa: F401  (fixtures)
    PASSWORD,
    Cloud,
    Conn,
    make_cloud,
    password_hash,
    system,
)
from tests.cloud.seed import add_user

TOKEN = "fake-token"


@dataclass
class FakeProvider:
    merchant: FakeMerchant
    url: str


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    merchant = FakeMerchant.sample(TOKEN)
    server = TestServer(fake_app(merchant), host="127.0.0.1")
    await server.start_server()
    try:
        yield FakeProvider(merchant, str(server.make_url("")).rstrip("/"))
    finally:
        await server.close()


@pytest.fixture
def pos_cloud(
    make_cloud: Callable[..., Awaitable[Cloud]],  # noqa: F811
    fake: FakeProvider,
) -> Callable[..., Awaitable[Cloud]]:
    key = new_key_text()

    async def start(**overrides: Any) -> Cloud:
        values: dict[str, Any] = {
            "pos_sandbox_url": fake.url,
            "pos_sync_interval_s": 0,
            "pos_poll_interval_s": 0.05,
            "secret_key": key,
            "pos_retry_max_s": 0.05,
        }
        values.update(overrides)
        return await make_cloud(**values)

    return start


@dataclass
class Owners:
    cloud: Cloud
    ids: dict[str, UUID]
    tokens: dict[str, str]

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    async def call(
        self, name: str, method: str, path: str, body: Any = None, **params: Any
    ) -> tuple[int, Any]:
        resp = await self.cloud.client.request(
            method, path, json=body, params=params or None, headers=self.auth(name)
        )
        data = await resp.json() if resp.status != 204 else None
        return resp.status, data


@pytest.fixture
async def owners(
    pos_cloud: Callable[..., Awaitable[Cloud]],
    system: Conn,  # noqa: F811
    password_hash: str,  # noqa: F811
) -> Owners:
    cloud = await pos_cloud()
    ids = {}
    for name, role in (("alice", "farm_manager"), ("bob", "farm_manager"), ("nora", "analyst")):
        ids[name] = await add_user(system, f"{name}@example.com", role)
    await system.execute("UPDATE users SET password_hash = $1", password_hash)
    tokens = {name: await cloud.login(f"{name}@example.com", PASSWORD) for name in ids}
    return Owners(cloud, ids, tokens)


def config_body(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "Shop",
        "environment": "sandbox",
        "access_token": TOKEN,
        "webhook_signature_key": "whsec-fake-signature-key",
        "notification_url": "https://cloud.example/api/v1/pos/webhook",
        "location_ids": [],
    }
    body.update(extra)
    return body


async def wait_for(check: Callable[[], Awaitable[bool]], what: str, limit_s: float = 60) -> None:
    """Poll ``check`` until it holds (the background work is asynchronous); ``limit_s`` only
    keeps a broken run from hanging."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)
