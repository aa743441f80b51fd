"""Login and token authentication on the cloud (docs/design.md section 4)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from uuid import UUID

import aiohttp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.keyfile import load_or_create_private_key
from protocol.tokens import TokenSigner, TokenVerifier, hash_secret
from tests.cloud.api.conftest import PASSWORD, Cloud, Conn, World, assert_error


async def test_login_opens_a_session_whose_token_reads_the_api(
    cloud: Cloud, world: World, system: Conn
) -> None:
    resp = await cloud.client.post(
        "/api/v1/login",
        json={"email": "Alice@Example.com", "password": PASSWORD},
        headers={"User-Agent": "dashboard/1.0"},
    )
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    alice = world.users["alice"]
    assert body["token_type"] == "bearer"
    assert body["expires_in"] == 3600
    assert body["user"] == {"id": str(alice), "email": "alice@example.com", "role": "farm_manager"}

    assert cloud.settings.signing_key_path is not None
    key = load_or_create_private_key(cloud.settings.signing_key_path)
    claims = TokenVerifier({"farm-cloud": key.public_key()}).verify(body["access_token"])
    assert (claims.user_id, claims.role) == (str(alice), "farm_manager")
    assert claims.expires_at - claims.issued_at == 3600

    session = await system.fetchrow(
        "SELECT user_id, revoked_at, expires_at > now() + interval '29 days' AS long,"
        " host(ip) AS ip, user_agent FROM sessions WHERE id = $1",
        UUID(claims.session_id),
    )
    assert session is not None
    assert (session["user_id"], session["revoked_at"], session["long"]) == (alice, None, True)
    assert (session["ip"], session["user_agent"]) == ("127.0.0.1", "dashboard/1.0")
    # The refresh token is stored only as its hash, in the session's chain.
    stored = await system.fetchval(
        "SELECT token_hash FROM refresh_tokens WHERE session_id = $1", UUID(claims.session_id)
    )
    assert stored == bytes.fromhex(hash_secret(body["refresh_token"]))
    assert (
        await system.fetchval(
            "SELECT event_type FROM auth_events WHERE session_id = $1", UUID(claims.session_id)
        )
        == "login_ok"
    )

    status, farms = await cloud.get("/api/v1/farms/", body["access_token"])
    assert status == 200
    assert [farm["name"] for farm in farms["farms"]] == ["Alice's farm"]


async def test_auth_login_is_the_same_operation(cloud: Cloud, world: World) -> None:
    resp = await cloud.client.post(
        "/auth/login", json={"email": "rita@example.com", "password": PASSWORD}
    )
    assert resp.status == 200
    assert (await resp.json())["user"]["role"] == "user"


async def test_wrong_password_and_unknown_account_get_the_same_answer(
    cloud: Cloud, world: World, system: Conn
) -> None:
    answers = []
    for email, password in (("alice@example.com", "wrong password"), ("nobody@x.org", PASSWORD)):
        resp = await cloud.client.post("/api/v1/login", json={"email": email, "password": password})
        assert resp.status == 400
        body = await resp.json()
        assert_error(body, "INVALID_CREDENTIALS")
        answers.append(body["error"])
    assert answers[0] == answers[1]
    events = await system.fetch(
        "SELECT email, details->>'reason' AS reason FROM auth_events"
        " WHERE event_type = 'login_failed' ORDER BY created_at, email"
    )
    assert {(e["email"], e["reason"]) for e in events} == {
        ("alice@example.com", "wrong_password"),
        ("nobody@x.org", "unknown_email"),
    }


async def test_a_stranger_cannot_lock_a_person_out(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn
) -> None:
    """Failures count per account and address: the guesser waits, the owner logs in."""
    cloud = await make_cloud(login_throttle_per_account=3)
    stranger = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=stranger) as session:
        statuses = []
        for _ in range(4):
            async with session.post(
                cloud.client.make_url("/api/v1/login"),
                json={"email": "bob@example.com", "password": "guess"},
            ) as resp:
                statuses.append(resp.status)
        assert statuses == [400, 400, 400, 429]
    await cloud.login("bob@example.com")  # from 127.0.0.1, with the right password
    assert not await system.fetchval(
        "SELECT locked_until > now() FROM users WHERE id = $1", world.users["bob"]
    )


async def test_suspending_a_user_refuses_their_login_and_their_live_token(
    cloud: Cloud, world: World, system: Conn
) -> None:
    token = await cloud.login("rita@example.com")
    assert (await cloud.get("/api/v1/farms/", token))[0] == 200
    await system.execute("UPDATE users SET status = 'suspended' WHERE id = $1", world.users["rita"])
    status, body = await cloud.get("/api/v1/farms/", token)
    assert status == 401
    assert_error(body, "UNAUTHORIZED")
    resp = await cloud.client.post(
        "/api/v1/login", json={"email": "rita@example.com", "password": PASSWORD}
    )
    assert resp.status == 400


async def test_a_revoked_session_is_refused_at_once(
    cloud: Cloud, world: World, system: Conn
) -> None:
    token = await cloud.login("will@example.com")
    await system.execute(
        "UPDATE sessions SET revoked_at = now() WHERE user_id = $1", world.users["will"]
    )
    status, body = await cloud.get("/api/v1/farms/", token)
    assert status == 401
    assert_error(body, "UNAUTHORIZED")
    assert "revoked" in body["error"]["message"]


async def test_missing_malformed_foreign_and_expired_tokens_are_401(
    cloud: Cloud, world: World
) -> None:
    resp = await cloud.client.get("/api/v1/farms/")
    assert resp.status == 401
    assert_error(await resp.json(), "UNAUTHORIZED")
    for header in ("Basic YWxpY2U6cHc=", "Bearer not-a-jwt", "Bearer "):
        resp = await cloud.client.get("/api/v1/farms/", headers={"Authorization": header})
        assert resp.status == 401, header
        assert_error(await resp.json(), "UNAUTHORIZED")

    # A well-formed token of the right issuer, signed by another key (say, an agent's).
    token = await cloud.login("alice@example.com")
    forged = TokenSigner("farm-cloud", Ed25519PrivateKey.generate()).issue(
        str(world.users["admin"]), "admin", "00000000-0000-0000-0000-000000000000"
    )
    assert (await cloud.get("/api/v1/farms/", forged))[0] == 401

    # The cloud's own key, but expired an hour ago.
    assert cloud.settings.signing_key_path is not None
    key = load_or_create_private_key(cloud.settings.signing_key_path)
    claims = TokenVerifier({"farm-cloud": key.public_key()}).verify(token)
    expired = TokenSigner("farm-cloud", key).issue(
        claims.user_id, claims.role, claims.session_id, now=time.time() - 7200
    )
    status, body = await cloud.get("/api/v1/farms/", expired)
    assert status == 401
    assert_error(body, "TOKEN_EXPIRED")


async def test_login_input_is_validated(cloud: Cloud) -> None:
    resp = await cloud.client.post("/api/v1/login", json={"email": "a@b.c"})
    assert resp.status == 422
    body = await resp.json()
    assert_error(body, "VALIDATION_ERROR")
    assert body["error"]["details"]["errors"] == [{"field": "password", "issue": "Field required"}]
    resp = await cloud.client.post(
        "/api/v1/login", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert resp.status == 400
    assert_error(await resp.json(), "BAD_REQUEST")
