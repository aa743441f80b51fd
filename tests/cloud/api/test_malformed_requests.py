"""The cloud shares the agent's HTTP layer (protocol/http): bodies that do not decode, deeply
nested JSON and refused credentials are answered in the envelope, counted per address."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.cloud.api.conftest import Cloud


async def test_gzip_garbage_and_nested_json_are_400s_before_authentication(cloud: Cloud) -> None:
    for path in ("/api/v1/login", "/api/v1/farms/", "/health"):
        resp = await cloud.client.post(
            path,
            data=b"garbage",
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert resp.status == 400, await resp.text()
        assert (await resp.json())["error"]["code"] == "BAD_REQUEST"
    resp = await cloud.client.post(
        "/api/v1/login", data=b"[" * 1000, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 400 and (await resp.json())["error"]["code"] == "BAD_REQUEST"


@pytest.mark.parametrize(
    "credentials",
    [{"X-API-Key": "fk_guessed"}, {"Authorization": "Bearer not-a-token"}],
    ids=["wrong API key", "garbage bearer token"],
)
async def test_refused_credentials_are_counted_per_address(
    make_cloud: Callable[..., Awaitable[Cloud]], credentials: dict[str, str]
) -> None:
    cloud = await make_cloud(rate_limit_per_address=3)
    remaining = []
    for _ in range(3):
        resp = await cloud.client.get("/api/v1/farms/", headers=credentials)
        assert resp.status == 401 and resp.headers["X-RateLimit-Limit"] == "3"
        remaining.append(resp.headers["X-RateLimit-Remaining"])
    assert remaining == ["2", "1", "0"]
    resp = await cloud.client.get("/api/v1/farms/", headers=credentials)
    assert resp.status == 429 and (await resp.json())["error"]["code"] == "RATE_LIMITED"
