"""Users (admin), profiles and role changes (docs/design.md section 12)."""

from __future__ import annotations

from agent.store.one_time_tokens import OneTimeTokenStore
from agent.web.keys import DATABASE
from protocol.tokens import hash_secret, new_secret
from tests.agent.identity.conftest import (
    PASSWORD,
    create_farm,
    create_user,
    error_of,
    login,
    tokens_of,
)
from tests.conftest import ADMIN_EMAIL, Agent

MISSING = "00000000-0000-4000-8000-000000000000"


async def test_admin_lists_users_filtered_without_secrets(agent: Agent) -> None:
    await create_user(agent, "analyst")
    await create_user(agent, "operator")
    resp = await agent.client.get("/api/v1/users/?role=analyst", headers=agent.auth())
    body = await resp.json()
    assert resp.status == 200, body
    assert body["total"] == 1 and body["users"][0]["role"] == "analyst"
    resp = await agent.client.get("/api/v1/users?limit=2&offset=0", headers=agent.auth())
    body = await resp.json()
    assert body["total"] == 3 and len(body["users"]) == 2
    assert "password" not in str(body) and "mfa_secret" not in str(body)
    await error_of(await agent.client.get("/api/v1/users/?limit=0", headers=agent.auth()), 422)


async def test_only_admins_manage_users(agent: Agent) -> None:
    manager = await create_user(agent, "farm_manager")
    token = (await tokens_of(agent, manager["email"]))["access_token"]
    headers = agent.auth(token)
    await error_of(await agent.client.get("/api/v1/users/", headers=headers), 403)
    body = {"email": "x@farm.test", "password": PASSWORD, "role": "admin"}
    await error_of(await agent.client.post("/api/v1/users/", json=body, headers=headers), 403)
    other = await create_user(agent)
    for method, path, payload in (
        ("GET", f"/api/v1/users/{other['id']}", None),
        ("PUT", f"/api/v1/users/{manager['id']}", {"role": "admin"}),
        ("DELETE", f"/api/v1/users/{other['id']}", None),
        ("POST", "/api/v1/users/permissions", {"user_id": manager["id"], "role": "admin"}),
    ):
        resp = await agent.client.request(method, path, json=payload, headers=headers)
        await error_of(resp, 403)
    # Users read themselves.
    resp = await agent.client.get(f"/api/v1/users/{manager['id']}", headers=headers)
    assert resp.status == 200
    await error_of(await agent.client.get("/api/v1/users/"), 401)


async def test_create_grants_farms_and_refuses_duplicates_and_bad_input(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    user = await create_user(agent, "operator", farms_access=[farm_id])
    assert user["farms_access"] == [farm_id]
    resp = await agent.client.get(
        f"/api/v1/permissions/?user_id={user['id']}", headers=agent.auth()
    )
    assert [p["permission_type"] for p in (await resp.json())["permissions"]] == ["read_write"]
    body = {"email": user["email"].upper(), "password": PASSWORD, "role": "user"}
    resp = await agent.client.post("/api/v1/users/", json=body, headers=agent.auth())
    await error_of(resp, 409)
    body = {"email": "y@farm.test", "password": PASSWORD, "role": "overlord"}
    resp = await agent.client.post("/api/v1/users/", json=body, headers=agent.auth())
    assert (await error_of(resp, 422))["details"]["errors"][0]["field"] == "role"
    body = {"email": "y@farm.test", "password": PASSWORD, "farms_access": [MISSING]}
    resp = await agent.client.post("/api/v1/users/", json=body, headers=agent.auth())
    await error_of(resp, 422)


async def test_update_changes_fields_and_a_new_password_ends_sessions(agent: Agent) -> None:
    user = await create_user(agent)
    token = (await tokens_of(agent, user["email"]))["access_token"]
    resp = await agent.client.put(
        f"/api/v1/users/{user['id']}",
        json={"role": "analyst", "full_name": "Ada", "password": "a brand new password"},
        headers=agent.auth(),
    )
    updated = await resp.json()
    assert resp.status == 200, updated
    assert (updated["role"], updated["full_name"]) == ("analyst", "Ada")
    await error_of(await agent.client.get("/auth/verify", headers=agent.auth(token)), 401)
    assert (await login(agent, user["email"], "a brand new password")).status == 200
    for body in ({}, {"full_name": None}, {"status": "gone"}):
        resp = await agent.client.put(
            f"/api/v1/users/{user['id']}", json=body, headers=agent.auth()
        )
        await error_of(resp, 422)
    resp = await agent.client.put(
        f"/api/v1/users/{user['id']}", json={"email": ADMIN_EMAIL}, headers=agent.auth()
    )
    await error_of(resp, 409)
    resp = await agent.client.put(
        f"/api/v1/users/{MISSING}", json={"role": "user"}, headers=agent.auth()
    )
    await error_of(resp, 404)


async def test_delete_removes_the_user_and_guards_the_admins(agent: Agent) -> None:
    user = await create_user(agent)
    token = (await tokens_of(agent, user["email"]))["access_token"]
    assert (
        await agent.client.delete(f"/api/v1/users/{user['id']}", headers=agent.auth())
    ).status == 204
    await error_of(await agent.client.get("/auth/verify", headers=agent.auth(token)), 401)
    resp = await agent.client.get(f"/api/v1/users/{user['id']}", headers=agent.auth())
    await error_of(resp, 404)

    me = await (await agent.client.get("/api/v1/users/profile", headers=agent.auth())).json()
    await error_of(
        await agent.client.delete(f"/api/v1/users/{me['id']}", headers=agent.auth()), 400
    )
    resp = await agent.client.put(
        f"/api/v1/users/{me['id']}", json={"role": "user"}, headers=agent.auth()
    )
    assert "last active admin" in (await error_of(resp, 400))["message"]


async def test_profile_changes_need_the_current_password_for_email_and_password(
    agent: Agent,
) -> None:
    user = await create_user(agent)
    other = (await tokens_of(agent, user["email"]))["access_token"]
    token = (await tokens_of(agent, user["email"]))["access_token"]
    headers = agent.auth(token)
    resp = await agent.client.put(
        "/api/v1/users/profile", json={"full_name": "Grace"}, headers=headers
    )
    assert (await resp.json())["full_name"] == "Grace"
    resp = await agent.client.put(
        "/api/v1/users/profile", json={"password": "a new long password"}, headers=headers
    )
    await error_of(resp, 422)
    resp = await agent.client.put(
        "/api/v1/users/profile",
        json={"password": "a new long password", "current_password": "wrong one"},
        headers=headers,
    )
    await error_of(resp, 400)
    resp = await agent.client.put(
        "/api/v1/users/profile",
        json={"password": "a new long password", "current_password": PASSWORD},
        headers=headers,
    )
    assert resp.status == 200, await resp.text()
    # This session goes on; the other one ends.
    assert (await agent.client.get("/auth/verify", headers=headers)).status == 200
    await error_of(await agent.client.get("/auth/verify", headers=agent.auth(other)), 401)
    resp = await agent.client.put("/api/v1/users/profile", json={"role": "admin"}, headers=headers)
    await error_of(resp, 422)


async def test_post_users_permissions_sets_role_and_grants(agent: Agent) -> None:
    north, south = await create_farm(agent), await create_farm(agent, "South")
    user = await create_user(agent, farms_access=[north])
    body = {
        "user_id": user["id"],
        "role": "farm_manager",
        "permissions": [{"farm_id": south, "permission_type": "read_only"}],
    }
    resp = await agent.client.post("/api/v1/users/permissions", json=body, headers=agent.auth())
    changed = await resp.json()
    assert resp.status == 200, changed
    assert changed["role"] == "farm_manager" and changed["farms_access"] == [south]
    token = (await tokens_of(agent, user["email"]))["access_token"]
    await error_of(await agent.client.get(f"/api/v1/farms/{north}", headers=agent.auth(token)), 404)
    resp = await agent.client.put(
        f"/api/v1/farms/{south}", json={"name": "S"}, headers=agent.auth(token)
    )
    await error_of(resp, 403)
    resp = await agent.client.post(
        "/api/v1/users/permissions", json={"user_id": user["id"]}, headers=agent.auth()
    )
    await error_of(resp, 422)


async def test_a_reset_mailed_to_the_old_address_dies_when_the_address_changes(
    agent: Agent,
) -> None:
    user = await create_user(agent)
    secret = new_secret("rp_")
    await OneTimeTokenStore(agent.client.app[DATABASE]).issue(
        hash_secret(secret), user["id"], "reset_password", 3600
    )
    token = (await tokens_of(agent, user["email"]))["access_token"]
    resp = await agent.client.put(
        "/api/v1/users/profile",
        json={"email": "moved@farm.test", "current_password": PASSWORD},
        headers=agent.auth(token),
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.post(
        "/auth/reset-password/confirm",
        json={"token": secret, "new_password": "an attacker's password"},
    )
    await error_of(resp, 400)
