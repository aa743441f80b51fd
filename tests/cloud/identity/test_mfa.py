"""TOTP MFA on the cloud: enrolment, the login challenge, replay protection (docs/design.md 4)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from farmkit.totp import STEP_S, totp_code
from tests.cloud.identity.conftest import Cloud, Conn, User, bearer, error_of, login


class Clock:
    """A clock the test moves by whole TOTP steps."""

    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now

    def next_step(self) -> None:
        self.now += STEP_S


async def post(cloud: Cloud, path: str, token: str | None = None, **body: Any) -> Any:
    headers = bearer(token) if token else {}
    return await cloud.client.post(path, json=body or None, headers=headers)


async def enable_mfa(cloud: Cloud, user: User, clock: Clock) -> tuple[str, str]:
    """Log in, enrol and confirm; return the secret and the access token."""
    token = (await (await login(cloud, user.email)).json())["access_token"]
    resp = await post(cloud, "/auth/mfa/enrol", token)
    enrolment = await resp.json()
    assert resp.status == 200, enrolment
    resp = await post(
        cloud, "/auth/mfa/confirm", token, code=totp_code(enrolment["secret"], clock())
    )
    assert resp.status == 200, await resp.text()
    assert await resp.json() == {"mfa_enabled": True}
    return enrolment["secret"], token


async def test_enrolment_stores_the_seed_encrypted_and_needs_a_right_code(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User, system: Conn
) -> None:
    clock = Clock()
    cloud = await make_cloud(clock=clock)
    token = (await (await login(cloud, user.email)).json())["access_token"]
    other = (await (await login(cloud, user.email)).json())["access_token"]
    enrolment = await (await post(cloud, "/auth/mfa/enrol", token)).json()
    secret = enrolment["secret"]
    assert enrolment["otpauth_uri"].startswith("otpauth://totp/")
    stored = bytes(await system.fetchval("SELECT mfa_secret FROM users WHERE id = $1", user.id))
    assert secret.encode() not in stored and len(stored) > len(secret)

    wrong = "000000" if totp_code(secret, clock()) != "000000" else "111111"
    resp = await post(cloud, "/auth/mfa/confirm", token, code=wrong)
    assert (await error_of(resp, 400))["code"] == "INVALID_CREDENTIALS"
    assert not await system.fetchval("SELECT mfa_enabled FROM users WHERE id = $1", user.id)

    resp = await post(cloud, "/auth/mfa/confirm", token, code=totp_code(secret, clock()))
    assert resp.status == 200
    # Turning MFA on ends the user's other sessions, not the one that did it.
    assert (await cloud.client.get("/auth/verify", headers=bearer(other))).status == 401
    assert (await cloud.client.get("/auth/verify", headers=bearer(token))).status == 200
    assert (await post(cloud, "/auth/mfa/enrol", token)).status == 409


async def test_login_of_an_mfa_user_answers_a_challenge_exchanged_with_a_code(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User, system: Conn
) -> None:
    clock = Clock()
    cloud = await make_cloud(clock=clock)
    secret, _ = await enable_mfa(cloud, user, clock)
    resp = await login(cloud, user.email)
    answer = await resp.json()
    assert resp.status == 200, answer
    assert answer["mfa_required"] is True and "access_token" not in answer

    # The code used to confirm is spent: the same time step is refused (replay).
    resp = await post(
        cloud, "/auth/mfa/verify", challenge=answer["challenge"], code=totp_code(secret, clock())
    )
    assert (await error_of(resp, 400))["code"] == "INVALID_CREDENTIALS"
    clock.next_step()
    code = totp_code(secret, clock())
    resp = await post(cloud, "/auth/mfa/verify", challenge=answer["challenge"], code=code)
    tokens = await resp.json()
    assert resp.status == 200, tokens
    assert (
        await cloud.client.get("/auth/verify", headers=bearer(tokens["access_token"]))
    ).status == 200
    # The challenge works once.
    clock.next_step()
    resp = await post(
        cloud, "/auth/mfa/verify", challenge=answer["challenge"], code=totp_code(secret, clock())
    )
    assert resp.status == 400
    kinds = {r["event_type"] for r in await system.fetch("SELECT event_type FROM auth_events")}
    assert {"mfa_enrolled", "mfa_enabled", "mfa_challenge", "mfa_failed", "login_ok"} <= kinds


async def test_disabling_mfa_needs_a_code_and_restores_plain_login(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User
) -> None:
    clock = Clock()
    cloud = await make_cloud(clock=clock)
    secret, token = await enable_mfa(cloud, user, clock)
    clock.next_step()
    resp = await post(cloud, "/auth/mfa/disable", token, code="12345x")
    assert resp.status == 422
    resp = await post(cloud, "/auth/mfa/disable", token, code=totp_code(secret, clock()))
    assert resp.status == 200, await resp.text()
    assert await resp.json() == {"mfa_enabled": False}
    assert "access_token" in await (await login(cloud, user.email)).json()
    assert (await post(cloud, "/auth/mfa/disable", token, code="123456")).status == 400
