"""The running cloud and its world of users and farms (tests/cloud/api/conftest.py), plus
helpers for the user management tests."""

from __future__ import annotations

from typing import Any

from aiohttp import ClientResponse

from tests.cloud.api.conftest import (  # noqa: F401  (fixtures, found by name)
    cloud,
    make_cloud,
    password_hash,
    system,
    world,
)


def bearer(token: str) -> dict[str, str]:
    """Headers authenticating with an access token."""
    return {"Authorization": f"Bearer {token}"}


async def answer(resp: ClientResponse, status: int) -> Any:
    """The JSON body, after checking the status (the body is in the failure message)."""
    body = await resp.json()
    assert resp.status == status, body
    return body
