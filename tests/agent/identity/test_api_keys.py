"""API keys: admin-made, shown once, hashed, acting as their user, revoked at once."""

from __future__ import annotations

from typing import Any

from agent.web.keys import DATABASE
from tests.agent.identity.conftest import create_farm, create_user, error_of, events, tokens_of
from tests.conftest import Agent


async def new_key(agent: Agent, user_id: str, name: str = "greenhouse script") -> dict[str, Any]:
    resp = await agent.client.post(
        "/api/v1/api-keys", json={"user_id": user_id, "name": name}, headers=agent.auth()
    )
    key: dict[str, Any] = await resp.json()
    assert resp.status == 201, key
    return key


async def test_a_key_acts_as_its_user_with_their_role_and_farms(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    hidden = await create_farm(agent, "Hidden")
    user = await create_user(agent, "analyst", farms_access=[farm_id])
    key = await new_key(agent, user["id"])
    assert key["key"].startswith(key["prefix"]) and key["user_id"] == user["id"]
    headers = {"X-API-Key": key["key"]}

    resp = await agent.client.get("/api/v1/users/profile", headers=headers)
    assert (await resp.json())["id"] == user["id"]
    assert (await agent.client.get(f"/api/v1/farms/{farm_id}", headers=headers)).status == 200
    await error_of(await agent.client.get(f"/api/v1/farms/{hidden}", headers=headers), 404)
    resp = await agent.client.put(f"/api/v1/farms/{farm_id}", json={"name": "x"}, headers=headers)
    await error_of(resp, 403)
    await error_of(await agent.client.get("/api/v1/users/", headers=headers), 403)
    info = await (await agent.client.get("/auth/verify", headers=headers)).json()
    assert info["api_key_id"] == key["id"] and info["session_id"] is None
    # A key has no session to log out of.
    await error_of(await agent.client.post("/auth/logout", headers=headers), 400)


async def test_the_key_is_shown_once_and_stored_hashed(agent: Agent) -> None:
    user = await create_user(agent)
    key = await new_key(agent, user["id"])
    resp = await agent.client.get(f"/api/v1/api-keys?user_id={user['id']}", headers=agent.auth())
    listed = await resp.json()
    assert listed["total"] == 1 and "key" not in listed["api_keys"][0]
    assert listed["api_keys"][0]["prefix"] == key["prefix"]
    stored = await agent.client.app[DATABASE].fetch_all("SELECT key_hash FROM api_keys")
    assert key["key"] not in {row["key_hash"] for row in stored}


async def test_revoking_a_key_refuses_it_at_once(agent: Agent) -> None:
    user = await create_user(agent)
    key = await new_key(agent, user["id"])
    headers = {"X-API-Key": key["key"]}
    assert (await agent.client.get("/auth/verify", headers=headers)).status == 200
    resp = await agent.client.delete(f"/api/v1/api-keys/{key['id']}", headers=agent.auth())
    assert resp.status == 204
    await error_of(await agent.client.get("/auth/verify", headers=headers), 401)
    resp = await agent.client.get("/api/v1/api-keys?include_revoked=true", headers=agent.auth())
    assert (await resp.json())["api_keys"][0]["revoked_at"] is not None
    assert [e["detail"]["key_id"] for e in await events(agent, "api_key_revoked")] == [key["id"]]
    assert [e["detail"]["key_id"] for e in await events(agent, "api_key_created")] == [key["id"]]


async def test_only_admins_manage_keys(agent: Agent) -> None:
    manager = await create_user(agent, "farm_manager")
    token = (await tokens_of(agent, manager["email"]))["access_token"]
    body = {"user_id": manager["id"], "name": "mine"}
    resp = await agent.client.post("/api/v1/api-keys", json=body, headers=agent.auth(token))
    await error_of(resp, 403)
    await error_of(await agent.client.get("/api/v1/api-keys", headers=agent.auth(token)), 403)
    key = await new_key(agent, manager["id"])
    resp = await agent.client.delete(f"/api/v1/api-keys/{key['id']}", headers=agent.auth(token))
    await error_of(resp, 403)


async def test_bad_keys_and_bad_input(agent: Agent) -> None:
    await error_of(await agent.client.get("/auth/verify", headers={"X-API-Key": "fk_nope"}), 401)
    missing = "00000000-0000-4000-8000-000000000000"
    resp = await agent.client.post(
        "/api/v1/api-keys", json={"user_id": missing, "name": "x"}, headers=agent.auth()
    )
    await error_of(resp, 404)
    resp = await agent.client.post(
        "/api/v1/api-keys", json={"user_id": "not-a-uuid", "name": ""}, headers=agent.auth()
    )
    fields = {e["field"] for e in (await error_of(resp, 422))["details"]["errors"]}
    assert fields == {"user_id", "name"}
    resp = await agent.client.delete(f"/api/v1/api-keys/{missing}", headers=agent.auth())
    await error_of(resp, 404)


async def test_a_key_of_a_suspended_user_is_refused(agent: Agent) -> None:
    user = await create_user(agent)
    key = await new_key(agent, user["id"])
    await agent.client.put(
        f"/api/v1/users/{user['id']}", json={"status": "suspended"}, headers=agent.auth()
    )
    resp = await agent.client.get("/auth/verify", headers={"X-API-Key": key["key"]})
    await error_of(resp, 401)
