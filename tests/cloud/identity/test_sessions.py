"""Refresh rotation, reuse detection, logout and tokens on the cloud (docs/design.md 4)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cloud.services.sync_delta import IdentityDeltaSource
from cloud.store.db import Database
from protocol.tokens import hash_secret
from tests.cloud.identity.conftest import Cloud, Conn, User, bearer, error_of, login
from tests.cloud.seed import add_farm_tree


async def tokens(cloud: Cloud, user: User) -> dict[str, Any]:
    resp = await login(cloud, user.email)
    body: dict[str, Any] = await resp.json()
    assert resp.status == 200, body
    return body


async def refresh(cloud: Cloud, token: str) -> tuple[int, dict[str, Any]]:
    resp = await cloud.client.post("/auth/refresh", json={"refresh_token": token})
    return resp.status, await resp.json()


async def test_refresh_rotates_the_token_and_keeps_the_session(
    cloud: Cloud, user: User, system: Conn
) -> None:
    first = await tokens(cloud, user)
    status, second = await refresh(cloud, first["refresh_token"])
    assert status == 200, second
    assert second["refresh_token"] != first["refresh_token"]
    assert second["user"] == first["user"]
    resp = await cloud.client.get("/auth/verify", headers=bearer(second["access_token"]))
    info = await resp.json()
    assert resp.status == 200, info
    assert info["user"]["id"] == str(user.id) and info["session_expires_at"]
    # The new token is chained to the one it replaced, in the same session.
    chain = await system.fetch(
        "SELECT token_hash, parent_id IS NOT NULL AS child, used_at IS NOT NULL AS used"
        " FROM refresh_tokens WHERE user_id = $1 ORDER BY created_at",
        user.id,
    )
    assert [(bytes(r["token_hash"]).hex(), r["child"], r["used"]) for r in chain] == [
        (hash_secret(first["refresh_token"]), False, True),
        (hash_secret(second["refresh_token"]), True, False),
    ]
    # And the rotated token refreshes again.
    status, third = await refresh(cloud, second["refresh_token"])
    assert status == 200, third


async def test_reusing_a_refresh_token_revokes_the_whole_session(
    cloud: Cloud, user: User, system: Conn
) -> None:
    first = await tokens(cloud, user)
    _, second = await refresh(cloud, first["refresh_token"])
    status, body = await refresh(cloud, first["refresh_token"])
    assert status == 401, body
    # Everything of that session stops: the successor token and its access token.
    assert (await refresh(cloud, second["refresh_token"]))[0] == 401
    resp = await cloud.client.get("/auth/verify", headers=bearer(second["access_token"]))
    assert (await error_of(resp, 401))["code"] == "UNAUTHORIZED"
    reason = await system.fetchval(
        "SELECT revoked_reason FROM sessions WHERE user_id = $1", user.id
    )
    assert reason == "refresh_reuse"
    assert await system.fetchval(
        "SELECT count(*) FROM auth_events WHERE event_type = 'refresh_reuse' AND user_id = $1",
        user.id,
    )


async def test_unknown_refresh_token_is_refused(cloud: Cloud, user: User) -> None:
    status, body = await refresh(cloud, "rt_not-a-token")
    assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"


async def test_refresh_of_a_suspended_account_is_refused(
    cloud: Cloud, user: User, system: Conn
) -> None:
    first = await tokens(cloud, user)
    await system.execute("UPDATE users SET status = 'suspended' WHERE id = $1", user.id)
    assert (await refresh(cloud, first["refresh_token"]))[0] == 401


async def test_logout_refuses_the_access_token_at_once_and_reaches_agents(
    cloud: Cloud, user: User, system: Conn, database: Database
) -> None:
    body = await tokens(cloud, user)
    other = await tokens(cloud, user)
    resp = await cloud.client.post("/auth/logout", headers=bearer(body["access_token"]))
    assert resp.status == 204
    resp = await cloud.client.get("/auth/verify", headers=bearer(body["access_token"]))
    assert (await error_of(resp, 401))["code"] == "UNAUTHORIZED"
    assert (await refresh(cloud, body["refresh_token"]))[0] == 401
    # Only that session ended.
    resp = await cloud.client.get("/auth/verify", headers=bearer(other["access_token"]))
    assert resp.status == 200
    # An agent serving the user's farm learns of the revocation with its next sync.
    agent_id = await system.fetchval(
        "INSERT INTO agents (name, owner_id) VALUES ('pi', $1) RETURNING id", user.id
    )
    farm = await add_farm_tree(system, user.id, "Grace's farm")
    await system.execute("UPDATE farms SET agent_id = $1 WHERE id = $2", agent_id, farm.farm_id)
    source = IdentityDeltaSource(
        database, "farm-cloud", Ed25519PrivateKey.generate().public_key(), 3600
    )
    delta = await source.for_agent(agent_id)
    revoked = {s.id for s in delta.sessions if s.revoked_at is not None}
    session_id = await system.fetchval(
        "SELECT session_id FROM auth_events WHERE event_type = 'logout' AND user_id = $1", user.id
    )
    assert revoked == {str(session_id)}


async def test_logout_needs_a_token(cloud: Cloud) -> None:
    resp = await cloud.client.post("/auth/logout")
    assert resp.status == 401


async def test_a_users_sessions_are_invisible_to_another_user_in_sql(
    cloud: Cloud, user: User, system: Conn, database: Database
) -> None:
    await tokens(cloud, user)
    other: UUID = await system.fetchval(
        "INSERT INTO users (email) VALUES ('mallory@example.com') RETURNING id"
    )
    async with database.as_user(other) as conn:
        assert await conn.fetchval("SELECT count(*) FROM sessions") == 0
        assert await conn.fetchval("SELECT count(*) FROM refresh_tokens") == 0
        assert await conn.execute("UPDATE sessions SET revoked_at = now()") == "UPDATE 0"
    async with database.as_user(user.id) as conn:
        assert await conn.fetchval("SELECT count(*) FROM sessions") == 1


async def test_a_nul_character_in_a_login_is_a_422_not_a_500(cloud: Cloud) -> None:
    resp = await cloud.client.post(
        "/api/v1/login", json={"email": "a\u0000@b.c", "password": "whatever-password"}
    )
    assert resp.status == 422, await resp.text()
