"""Without a mail sender nobody could verify an address: a self-registered account signs in
unverified, as a user with no farm, and sees nothing (farms, hub entities) until an admin grants
it a farm (issue 24; with mail configured it must verify first, tests/agent/identity)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Agent

PASSWORD = "a long enough password"


async def test_without_mail_an_unverified_account_signs_in_and_sees_nothing(
    make_agent: Any,
) -> None:
    agent: Agent = await make_agent()
    resp = await agent.client.post(
        "/auth/register", json={"email": "walk-in@farm.test", "password": PASSWORD}
    )
    assert resp.status == 202, await resp.text()
    resp = await agent.client.post(
        "/api/v1/login", json={"email": "walk-in@farm.test", "password": PASSWORD}
    )
    body = await resp.json()
    assert resp.status == 200, body
    token = body["access_token"]
    resp = await agent.client.get("/api/v1/farms/", headers=agent.auth(token))
    assert (await resp.json())["total"] == 0
