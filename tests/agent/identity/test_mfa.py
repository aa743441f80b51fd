"""TOTP MFA: enrol, confirm, login challenge, replay refusal, disable (docs/design.md section 4)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from farmkit.totp import STEP_S, totp_code
from tests.agent.identity.conftest import (
    Clock,
    create_user,
    error_of,
    events,
    login,
    tokens_of,
)
from tests.conftest import Agent


async def enrolled_user(agent: Agent, clock: Clock) -> tuple[dict[str, Any], str, str]:
    """A user with MFA on: (user, secret, access token of the enrolling session)."""
    user = await create_user(agent, "operator")
    token = (await tokens_of(agent, user["email"]))["access_token"]
    resp = await agent.client.post("/auth/mfa/enrol", headers=agent.auth(token))
    enrolment = await resp.json()
    assert resp.status == 200, enrolment
    uri = urlparse(enrolment["otpauth_uri"])
    assert uri.scheme == "otpauth" and uri.netloc == "totp"
    assert parse_qs(uri.query)["secret"] == [enrolment["secret"]]
    code = totp_code(enrolment["secret"], clock())
    resp = await agent.client.post(
        "/auth/mfa/confirm", json={"code": code}, headers=agent.auth(token)
    )
    assert resp.status == 200 and (await resp.json())["mfa_enabled"] is True
    return user, enrolment["secret"], token


async def test_login_with_mfa_needs_a_code_after_the_password(agent: Agent, clock: Clock) -> None:
    user, secret, _ = await enrolled_user(agent, clock)
    resp = await login(agent, user["email"])
    answer = await resp.json()
    assert resp.status == 200, answer
    assert answer["mfa_required"] is True and "access_token" not in answer

    resp = await agent.client.post(
        "/auth/mfa/verify", json={"challenge": answer["challenge"], "code": "000000"}
    )
    assert (await error_of(resp, 400))["code"] == "INVALID_CREDENTIALS"
    clock.offset += STEP_S  # the confirm code's step is spent; take the next one
    body = {"challenge": answer["challenge"], "code": totp_code(secret, clock())}
    resp = await agent.client.post("/auth/mfa/verify", json=body)
    tokens = await resp.json()
    assert resp.status == 200, tokens
    resp = await agent.client.get("/auth/verify", headers=agent.auth(tokens["access_token"]))
    assert resp.status == 200
    # The challenge works once.
    await error_of(await agent.client.post("/auth/mfa/verify", json=body), 400)
    assert (await events(agent, "mfa_failed"))[0]["user_id"] == user["id"]


async def test_a_code_is_accepted_only_once(agent: Agent, clock: Clock) -> None:
    user, secret, _ = await enrolled_user(agent, clock)
    challenge = (await (await login(agent, user["email"])).json())["challenge"]
    # The code that confirmed enrolment is still inside its 30 s window, but spent.
    body = {"challenge": challenge, "code": totp_code(secret, clock())}
    await error_of(await agent.client.post("/auth/mfa/verify", json=body), 400)


async def test_enabling_mfa_ends_the_users_other_sessions(agent: Agent, clock: Clock) -> None:
    user = await create_user(agent)
    other = (await tokens_of(agent, user["email"]))["access_token"]
    token = (await tokens_of(agent, user["email"]))["access_token"]
    secret = (await (await agent.client.post("/auth/mfa/enrol", headers=agent.auth(token))).json())[
        "secret"
    ]
    resp = await agent.client.post(
        "/auth/mfa/confirm", json={"code": totp_code(secret, clock())}, headers=agent.auth(token)
    )
    assert resp.status == 200
    await error_of(await agent.client.get("/auth/verify", headers=agent.auth(other)), 401)
    assert (await agent.client.get("/auth/verify", headers=agent.auth(token))).status == 200


async def test_disable_needs_a_current_code(agent: Agent, clock: Clock) -> None:
    user, secret, token = await enrolled_user(agent, clock)
    resp = await agent.client.post("/auth/mfa/enrol", headers=agent.auth(token))
    await error_of(resp, 409)
    resp = await agent.client.post(
        "/auth/mfa/disable", json={"code": "123456"}, headers=agent.auth(token)
    )
    await error_of(resp, 400)
    clock.offset += STEP_S
    resp = await agent.client.post(
        "/auth/mfa/disable", json={"code": totp_code(secret, clock())}, headers=agent.auth(token)
    )
    assert resp.status == 200 and (await resp.json())["mfa_enabled"] is False
    assert "access_token" in await (await login(agent, user["email"])).json()


async def test_confirm_without_enrolment_and_bad_codes_are_refused(agent: Agent) -> None:
    user = await create_user(agent)
    token = (await tokens_of(agent, user["email"]))["access_token"]
    resp = await agent.client.post(
        "/auth/mfa/confirm", json={"code": "123456"}, headers=agent.auth(token)
    )
    await error_of(resp, 400)
    resp = await agent.client.post(
        "/auth/mfa/confirm", json={"code": "12ab56"}, headers=agent.auth(token)
    )
    await error_of(resp, 422)
    await error_of(await agent.client.post("/auth/mfa/enrol"), 401)


async def test_wrong_codes_count_as_failed_logins(make_agent: Any, clock: Clock) -> None:
    agent: Agent = await make_agent(login_failures_per_account=2)
    user, secret, _ = await enrolled_user(agent, clock)
    challenge = (await (await login(agent, user["email"])).json())["challenge"]
    for _ in range(2):
        resp = await agent.client.post(
            "/auth/mfa/verify", json={"challenge": challenge, "code": "000000"}
        )
        await error_of(resp, 400)
    clock.offset += STEP_S
    body = {"challenge": challenge, "code": totp_code(secret, clock())}
    resp = await agent.client.post("/auth/mfa/verify", json=body)
    await error_of(resp, 429)
    assert int(resp.headers["Retry-After"]) >= 1


async def test_an_admin_can_turn_off_mfa_for_a_user_who_lost_their_device(
    agent: Agent, clock: Clock
) -> None:
    user, _, _ = await enrolled_user(agent, clock)
    resp = await agent.client.put(
        f"/api/v1/users/{user['id']}", json={"mfa_enabled": False}, headers=agent.auth()
    )
    assert resp.status == 200 and (await resp.json())["mfa_enabled"] is False
    assert "access_token" in await (await login(agent, user["email"])).json()
