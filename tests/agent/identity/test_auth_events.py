"""The authentication event log, readable by admins (GET /api/v1/auth-events)."""

from __future__ import annotations

from tests.agent.identity.conftest import create_user, error_of, login, tokens_of
from tests.conftest import Agent


async def test_admins_read_events_newest_first_with_filters(agent: Agent) -> None:
    user = await create_user(agent)
    await error_of(await login(agent, user["email"], "wrong password!"), 400)
    tokens = await tokens_of(agent, user["email"])
    await agent.client.post("/auth/logout", headers=agent.auth(tokens["access_token"]))

    resp = await agent.client.get(f"/api/v1/auth-events?user_id={user['id']}", headers=agent.auth())
    body = await resp.json()
    assert resp.status == 200, body
    assert [e["kind"] for e in body["auth_events"]] == ["logout", "login_ok", "login_failed"]
    assert body["auth_events"][0]["address"] == "127.0.0.1"
    resp = await agent.client.get("/api/v1/auth-events?kind=login_ok&limit=1", headers=agent.auth())
    page = await resp.json()
    assert page["total"] == 2 and len(page["auth_events"]) == 1
    resp = await agent.client.get("/api/v1/auth-events?kind=bogus", headers=agent.auth())
    await error_of(resp, 422)


async def test_only_admins_read_events(agent: Agent) -> None:
    analyst = await create_user(agent, "analyst")
    token = (await tokens_of(agent, analyst["email"]))["access_token"]
    await error_of(await agent.client.get("/api/v1/auth-events", headers=agent.auth(token)), 403)
    await error_of(await agent.client.get("/api/v1/auth-events"), 401)
