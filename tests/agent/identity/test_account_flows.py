"""Registration, email verification and password reset (docs/design.md section 4)."""

from __future__ import annotations

from typing import Any

from agent.web.keys import DATABASE
from tests.agent.identity.conftest import (
    PASSWORD,
    CapturedMail,
    create_user,
    error_of,
    events,
    login,
    tokens_of,
)
from tests.conftest import Agent

NEW_PASSWORD = "another long password"


async def register(agent: Agent, email: str, password: str = PASSWORD) -> Any:
    return await agent.client.post("/auth/register", json={"email": email, "password": password})


async def test_register_creates_a_user_with_no_farms_and_mails_a_token(
    agent: Agent, mail: CapturedMail
) -> None:
    resp = await register(agent, "  New.Grower@Farm.test ")
    assert resp.status == 202, await resp.text()
    # Mail is configured: the account signs in once its address is verified (issue 24); a
    # wrong password still gets the uniform refusal.
    refused = await login(agent, "new.grower@farm.test")
    assert (await error_of(refused, 403))["code"] == "EMAIL_NOT_VERIFIED"
    wrong = await login(agent, "new.grower@farm.test", "not the password at all")
    assert (await error_of(wrong, 400))["code"] == "INVALID_CREDENTIALS"
    resp = await agent.client.post(
        "/auth/verify", json={"token": mail.token_to("new.grower@farm.test")}
    )
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["email_verified"] is True
    token = await tokens_of(agent, "new.grower@farm.test")
    resp = await agent.client.get(
        "/api/v1/users/profile", headers=agent.auth(token["access_token"])
    )
    user = await resp.json()
    assert (user["email"], user["role"], user["status"]) == (
        "new.grower@farm.test",
        "user",
        "active",
    )
    assert user["email_verified"] is True and user["farms_access"] == []
    resp = await agent.client.get("/api/v1/farms/", headers=agent.auth(token["access_token"]))
    assert (await resp.json())["total"] == 0
    # The token works once.
    resp = await agent.client.post(
        "/auth/verify", json={"token": mail.token_to("new.grower@farm.test")}
    )
    await error_of(resp, 400)


async def test_register_answers_the_same_for_a_known_address_and_mails_its_owner(
    agent: Agent, mail: CapturedMail
) -> None:
    new = await register(agent, "twice@farm.test")
    known = await register(agent, "TWICE@farm.test", "a different password")
    assert new.status == known.status == 202
    assert await new.json() == await known.json()
    first, second = [m for m in mail.messages if m.to == "twice@farm.test"]
    assert "verify" in first.subject and "registered already" in second.subject
    # The account keeps its first password (and, unverified, is told to verify).
    resp = await login(agent, "twice@farm.test")
    assert (await error_of(resp, 403))["code"] == "EMAIL_NOT_VERIFIED"
    resp = await login(agent, "twice@farm.test", "a different password")
    assert (await error_of(resp, 400))["code"] == "INVALID_CREDENTIALS"


async def test_register_refuses_bad_input(agent: Agent) -> None:
    fields = {
        e["field"]
        for e in (await error_of(await register(agent, "no-at-sign", "short"), 422))["details"][
            "errors"
        ]
    }
    assert fields == {"email", "password"}
    resp = await agent.client.post(
        "/auth/register", json={"email": "x@farm.test", "password": PASSWORD, "role": "admin"}
    )
    await error_of(resp, 422)


async def test_register_is_forbidden_when_disabled(make_agent: Any) -> None:
    agent: Agent = await make_agent(registration_enabled=False)
    assert (await error_of(await register(agent, "late@farm.test"), 403))["code"] == "FORBIDDEN"


async def test_reset_answers_the_same_for_unknown_addresses(
    agent: Agent, mail: CapturedMail
) -> None:
    user = await create_user(agent)
    known = await agent.client.post("/auth/reset-password", json={"email": user["email"]})
    unknown = await agent.client.post("/auth/reset-password", json={"email": "who@farm.test"})
    assert known.status == unknown.status == 202
    assert await known.json() == await unknown.json()
    assert [m.to for m in mail.messages] == [user["email"]]


async def test_reset_sets_a_new_password_once_and_ends_every_session(
    agent: Agent, mail: CapturedMail
) -> None:
    user = await create_user(agent)
    session = await tokens_of(agent, user["email"])
    await agent.client.post("/auth/reset-password", json={"email": user["email"]})
    token = mail.token_to(user["email"])
    body = {"token": token, "new_password": NEW_PASSWORD}
    resp = await agent.client.post("/auth/reset-password/confirm", json=body)
    assert resp.status == 204, await resp.text()

    resp = await agent.client.get("/auth/verify", headers=agent.auth(session["access_token"]))
    await error_of(resp, 401)
    await error_of(await login(agent, user["email"], PASSWORD), 400)
    assert (await login(agent, user["email"], NEW_PASSWORD)).status == 200
    resp = await agent.client.post("/auth/reset-password/confirm", json=body)
    await error_of(resp, 400)
    assert (await events(agent, "password_reset"))[0]["user_id"] == user["id"]


async def test_only_the_newest_unexpired_reset_token_works(
    agent: Agent, mail: CapturedMail
) -> None:
    user = await create_user(agent)
    await agent.client.post("/auth/reset-password", json={"email": user["email"]})
    older = mail.token_to(user["email"])
    await agent.client.post("/auth/reset-password", json={"email": user["email"]})
    newer = mail.token_to(user["email"])
    resp = await agent.client.post(
        "/auth/reset-password/confirm", json={"token": older, "new_password": NEW_PASSWORD}
    )
    await error_of(resp, 400)
    # Expire the current token (as an hour passing would).
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "UPDATE one_time_tokens SET expires_at = '2000-01-01T00:00:00.000Z'"
            " WHERE purpose = 'reset_password'"
        )
    resp = await agent.client.post(
        "/auth/reset-password/confirm", json={"token": newer, "new_password": NEW_PASSWORD}
    )
    await error_of(resp, 400)
    assert (await login(agent, user["email"], PASSWORD)).status == 200


async def test_reset_confirm_validates_the_new_password(agent: Agent) -> None:
    resp = await agent.client.post(
        "/auth/reset-password/confirm", json={"token": "pr_x", "new_password": "short"}
    )
    assert (await error_of(resp, 422))["details"]["errors"][0]["field"] == "new_password"
