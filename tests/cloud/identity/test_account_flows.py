"""Registration, email verification and password reset on the cloud (docs/design.md section 4)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tests.cloud.identity.conftest import (
    PASSWORD,
    Cloud,
    Conn,
    Outbox,
    User,
    bearer,
    error_of,
    login,
)

NEW_PASSWORD = "a brand new passphrase"


async def register(cloud: Cloud, email: str) -> tuple[int, dict[str, object]]:
    resp = await cloud.client.post(
        "/auth/register", json={"email": email, "password": PASSWORD, "full_name": "Ada L"}
    )
    return resp.status, await resp.json()


async def test_registration_creates_an_unverified_user_and_mails_a_token(
    cloud: Cloud, outbox: Outbox, system: Conn
) -> None:
    status, body = await register(cloud, "ada@example.com")
    assert status == 202, body
    # Mail is configured: the account signs in once its address is verified (issue 24).
    refused = await login(cloud, "ada@example.com")
    assert (await error_of(refused, 403))["code"] == "EMAIL_NOT_VERIFIED"
    assert (await error_of(await login(cloud, "ada@example.com", "wrong"), 400))["code"] == (
        "INVALID_CREDENTIALS"
    )  # without the password it is the uniform refusal
    token = outbox.token("ada@example.com")
    resp = await cloud.client.post("/auth/verify", json={"token": token})
    assert resp.status == 200, await resp.text()
    assert await resp.json() == {"email": "ada@example.com", "email_verified": True}
    assert await system.fetchval("SELECT email_verified FROM users WHERE email = 'ada@example.com'")
    session = await login(cloud, "ada@example.com")
    assert session.status == 200
    resp = await cloud.client.get(
        "/api/v1/users/profile",
        headers={"Authorization": f"Bearer {(await session.json())['access_token']}"},
    )
    profile = await resp.json()
    assert profile["email"] == "ada@example.com" and profile["full_name"] == "Ada L"
    assert (profile["role"], profile["email_verified"], profile["farms_access"]) == (
        "user",
        True,
        [],
    )
    # The token works once.
    resp = await cloud.client.post("/auth/verify", json={"token": token})
    assert (await error_of(resp, 400))["code"] == "BAD_REQUEST"
    kinds = await system.fetch("SELECT event_type FROM auth_events ORDER BY created_at")
    assert {"registered", "email_verified"} <= {r["event_type"] for r in kinds}


async def test_an_address_registers_once_and_the_answer_does_not_tell(
    cloud: Cloud, user: User, outbox: Outbox
) -> None:
    known_status, known = await register(cloud, user.email.upper())
    new_status, new = await register(cloud, "newcomer@example.com")
    assert known_status == new_status == 202 and known == new
    (note,) = [m for m in outbox.messages if m.to.lower() == user.email.lower()]
    assert "registered already" in note.subject


async def test_registration_can_be_disabled(
    make_cloud: Callable[..., Awaitable[Cloud]],
) -> None:
    cloud = await make_cloud(registration_enabled=False)
    status, body = await register(cloud, "ada@example.com")
    assert status == 403, body


async def test_password_reset_sets_a_new_password_and_ends_every_session(
    cloud: Cloud, user: User, outbox: Outbox, system: Conn
) -> None:
    session = await (await login(cloud, user.email)).json()
    resp = await cloud.client.post("/auth/reset-password", json={"email": user.email})
    assert resp.status == 202
    token = outbox.token(user.email)
    resp = await cloud.client.post(
        "/auth/reset-password/confirm", json={"token": token, "new_password": NEW_PASSWORD}
    )
    assert resp.status == 204, await resp.text()

    resp = await cloud.client.get("/auth/verify", headers=bearer(session["access_token"]))
    assert resp.status == 401
    assert (await login(cloud, user.email)).status == 400
    assert (await login(cloud, user.email, NEW_PASSWORD)).status == 200
    # The token is single use.
    resp = await cloud.client.post(
        "/auth/reset-password/confirm", json={"token": token, "new_password": "yet another one!"}
    )
    assert (await error_of(resp, 400))["code"] == "BAD_REQUEST"
    assert (await login(cloud, user.email, NEW_PASSWORD)).status == 200
    revoked = await system.fetchval(
        "SELECT details->>'sessions_revoked' FROM auth_events WHERE event_type = 'password_reset'"
    )
    assert revoked == "1"


async def test_reset_request_answers_the_same_for_unknown_addresses(
    cloud: Cloud, user: User, outbox: Outbox
) -> None:
    answers = []
    for email in (user.email, "nobody@example.com"):
        resp = await cloud.client.post("/auth/reset-password", json={"email": email})
        assert resp.status == 202
        answers.append(await resp.json())
    assert answers[0] == answers[1]
    assert [m.to for m in outbox.messages] == [user.email]


async def test_a_verification_token_is_no_reset_token(cloud: Cloud, outbox: Outbox) -> None:
    await register(cloud, "ada@example.com")
    token = outbox.token("ada@example.com")
    resp = await cloud.client.post(
        "/auth/reset-password/confirm", json={"token": token, "new_password": NEW_PASSWORD}
    )
    assert resp.status == 400
