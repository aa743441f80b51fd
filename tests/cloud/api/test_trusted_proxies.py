"""Behind a balancer (CLOUD_TRUSTED_PROXIES): per-address limits, login throttling and the
authentication log see the client the balancer names, never what a client claims itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from cloud.app import create_app
from protocol.http.server import EnvelopeAppRunner
from tests.cloud.api.conftest import Conn, World, cloud_settings
from tests.cloud.conftest import CloudDatabase


class _EnvelopeTestServer(TestServer):
    """The test server on the runner farm-cloud serves with (which applies trusted proxies)."""

    async def _make_runner(self, **kwargs: Any) -> web.BaseRunner:
        assert isinstance(self.app, web.Application)
        return EnvelopeAppRunner(self.app, **kwargs)


@pytest.fixture
async def behind_proxy(
    cloud_db: CloudDatabase,
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
    tmp_path: Path,
) -> AsyncIterator[Callable[..., Awaitable[TestClient[Any, Any]]]]:
    async def start(**overrides: Any) -> TestClient[Any, Any]:
        settings = cloud_settings(cloud_db, tmp_path / "key.pem", **overrides)
        return await aiohttp_client(_EnvelopeTestServer(create_app(settings)))

    yield start


def _via(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


async def test_each_client_behind_the_balancer_has_its_own_anonymous_quota(
    behind_proxy: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    client = await behind_proxy(trusted_proxies="127.0.0.1/32", rate_limit_per_address=2)
    for _ in range(2):
        assert (await client.get("/api/v1/farms", headers=_via("203.0.113.1"))).status == 401
    assert (await client.get("/api/v1/farms", headers=_via("203.0.113.1"))).status == 429
    assert (await client.get("/api/v1/farms", headers=_via("203.0.113.2"))).status == 401
    # A client cannot buy a fresh quota by sending its own header: the balancer appends.
    spoofed = _via("198.51.100.77, 203.0.113.1")
    assert (await client.get("/api/v1/farms", headers=spoofed)).status == 429


async def test_without_trusted_proxies_a_forwarded_header_buys_nothing(
    behind_proxy: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    client = await behind_proxy(rate_limit_per_address=2)
    for n in range(2):
        headers = _via(f"203.0.113.{n}")
        assert (await client.get("/api/v1/farms", headers=headers)).status == 401
    assert (await client.get("/api/v1/farms", headers=_via("203.0.113.9"))).status == 429


async def test_the_auth_log_and_login_throttle_see_the_real_client(
    behind_proxy: Callable[..., Awaitable[TestClient[Any, Any]]], world: World, system: Conn
) -> None:
    client = await behind_proxy(trusted_proxies="127.0.0.1/32", login_failures_per_address=2)
    wrong = {"email": "alice@example.com", "password": "wrong"}
    for _ in range(2):
        resp = await client.post("/api/v1/login", json=wrong, headers=_via("203.0.113.1"))
        assert resp.status == 400
    resp = await client.post("/api/v1/login", json=wrong, headers=_via("203.0.113.1"))
    assert resp.status == 429
    # Another client behind the same balancer is not throttled by the first one's failures.
    resp = await client.post("/api/v1/login", json=wrong, headers=_via("203.0.113.2"))
    assert resp.status == 400
    addresses = await system.fetch(
        "SELECT DISTINCT host(ip) AS ip FROM auth_events WHERE event_type = 'login_failed'"
    )
    assert {r["ip"] for r in addresses} == {"203.0.113.1", "203.0.113.2"}


async def test_a_bad_trusted_proxies_setting_is_refused(
    cloud_db: CloudDatabase, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="not an address or network"):
        cloud_settings(cloud_db, tmp_path / "key.pem", trusted_proxies="10.0.0.0/8, nonsense")
