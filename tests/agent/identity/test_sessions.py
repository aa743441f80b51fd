"""Login, refresh rotation, reuse detection, logout and token verification (docs/design.md 4)."""

from __future__ import annotations

import aiohttp

from tests.agent.identity.conftest import (
    PASSWORD,
    create_user,
    error_of,
    events,
    login,
    tokens_of,
)
from tests.conftest import Agent


async def refresh(agent: Agent, token: str) -> tuple[int, dict[str, object]]:
    resp = await agent.client.post("/auth/refresh", json={"refresh_token": token})
    return resp.status, await resp.json()


async def test_login_answers_tokens_on_both_paths_and_never_a_password(agent: Agent) -> None:
    user = await create_user(agent, "analyst")
    for path in ("/api/v1/login", "/auth/login"):
        resp = await agent.client.post(path, json={"email": user["email"], "password": PASSWORD})
        body = await resp.json()
        assert resp.status == 200, body
        assert body["token_type"] == "bearer" and body["expires_in"] == 3600
        assert body["user"] == {"id": user["id"], "email": user["email"], "role": "analyst"}
        assert body["refresh_token"] and "password" not in str(body)


async def test_wrong_credentials_are_one_answer_and_recorded(agent: Agent) -> None:
    user = await create_user(agent)
    wrong = await error_of(await login(agent, user["email"], "not the password"), 400)
    unknown = await error_of(await login(agent, "nobody@farm.test", PASSWORD), 400)
    assert wrong["code"] == unknown["code"] == "INVALID_CREDENTIALS"
    assert wrong["message"] == unknown["message"]
    failed = await events(agent, "login_failed")
    assert {e["email"] for e in failed} >= {user["email"], "nobody@farm.test"}
    assert any(e["detail"] == {"reason": "wrong_password"} for e in failed)


async def test_login_validates_its_input(agent: Agent) -> None:
    resp = await agent.client.post("/api/v1/login", json={"email": "a@b.c"})
    assert (await error_of(resp, 422))["details"]["errors"][0]["field"] == "password"
    resp = await agent.client.post(
        "/api/v1/login", data=b"{", headers={"Content-Type": "application/json"}
    )
    await error_of(resp, 400)


async def test_refresh_rotates_and_reuse_revokes_the_whole_session(agent: Agent) -> None:
    user = await create_user(agent)
    first = await tokens_of(agent, user["email"])
    status, second = await refresh(agent, str(first["refresh_token"]))
    assert status == 200 and second["refresh_token"] != first["refresh_token"]
    resp = await agent.client.get("/auth/verify", headers=agent.auth(str(second["access_token"])))
    assert resp.status == 200

    # The spent token comes back (stolen?): the session ends for everyone holding it.
    status, body = await refresh(agent, str(first["refresh_token"]))
    assert status == 401, body
    for access in (first["access_token"], second["access_token"]):
        resp = await agent.client.get("/auth/verify", headers=agent.auth(str(access)))
        await error_of(resp, 401)
    status, _ = await refresh(agent, str(second["refresh_token"]))
    assert status == 401
    reuse = await events(agent, "refresh_reuse")
    assert reuse and reuse[0]["user_id"] == user["id"]


async def test_an_unknown_refresh_token_is_refused(agent: Agent) -> None:
    status, body = await refresh(agent, "rt_not-a-token")
    assert status == 401, body
    resp = await agent.client.post("/auth/refresh", json={"refresh_token": ""})
    await error_of(resp, 422)
    # No token at all means the web app's cookie session; without the cookie that is a 401.
    resp = await agent.client.post("/auth/refresh", json={})
    await error_of(resp, 401)


async def test_logout_refuses_the_session_at_once(agent: Agent) -> None:
    user = await create_user(agent)
    other = await tokens_of(agent, user["email"])
    session = await tokens_of(agent, user["email"])
    headers = agent.auth(str(session["access_token"]))
    resp = await agent.client.post("/auth/logout", headers=headers)
    assert resp.status == 204
    await error_of(await agent.client.get("/api/v1/users/profile", headers=headers), 401)
    status, _ = await refresh(agent, str(session["refresh_token"]))
    assert status == 401
    # Only that session: the user's other login still works.
    resp = await agent.client.get("/auth/verify", headers=agent.auth(str(other["access_token"])))
    assert resp.status == 200
    assert (await events(agent, "logout"))[0]["user_id"] == user["id"]


async def test_logout_needs_authentication(agent: Agent) -> None:
    await error_of(await agent.client.post("/auth/logout"), 401)
    resp = await agent.client.post("/auth/logout", headers=agent.auth("not.a.token"))
    await error_of(resp, 401)


async def test_verify_tells_whose_token_it_is(agent: Agent) -> None:
    user = await create_user(agent, "operator")
    tokens = await tokens_of(agent, user["email"])
    resp = await agent.client.get("/auth/verify", headers=agent.auth(str(tokens["access_token"])))
    body = await resp.json()
    assert resp.status == 200, body
    assert body["valid"] is True and body["user"]["role"] == "operator"
    assert body["session_id"] and body["session_expires_at"].endswith("Z")
    await error_of(await agent.client.get("/auth/verify"), 401)


async def test_repeated_failures_throttle_the_account_even_with_the_right_password(
    make_agent: object,
) -> None:
    agent: Agent = await make_agent(login_failures_per_account=3)  # type: ignore[operator]
    user = await create_user(agent)
    bystander = await create_user(agent)
    for _ in range(3):
        await error_of(await login(agent, user["email"], "wrong password!"), 400)
    resp = await login(agent, user["email"])
    error = await error_of(resp, 429)
    assert error["code"] == "RATE_LIMITED"
    assert 1 <= int(resp.headers["Retry-After"]) <= 900
    # Unknown accounts are throttled the same way, so a 429 does not reveal an account.
    for _ in range(3):
        await error_of(await login(agent, "ghost@farm.test", "wrong password!"), 400)
    await error_of(await login(agent, "ghost@farm.test"), 429)
    # Another account from the same address is not affected.
    assert (await login(agent, bystander["email"])).status == 200
    assert await events(agent, "login_throttled")


async def test_a_stranger_cannot_lock_a_person_out(make_agent: object) -> None:
    """Failures count per account and address: the guesser waits, the owner logs in."""
    agent: Agent = await make_agent(login_failures_per_account=3)  # type: ignore[operator]
    user = await create_user(agent)
    stranger = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=stranger) as session:
        statuses = []
        for _ in range(4):
            async with session.post(
                agent.client.make_url("/api/v1/login"),
                json={"email": user["email"], "password": "wrong password!"},
            ) as resp:
                statuses.append(resp.status)
    assert statuses == [400, 400, 400, 429]
    assert (await login(agent, user["email"])).status == 200  # the owner, from 127.0.0.1


async def test_a_successful_login_resets_the_account_count(make_agent: object) -> None:
    agent: Agent = await make_agent(login_failures_per_account=3)  # type: ignore[operator]
    user = await create_user(agent)
    for _ in range(2):
        await error_of(await login(agent, user["email"], "wrong password!"), 400)
    assert (await login(agent, user["email"])).status == 200
    for _ in range(2):
        await error_of(await login(agent, user["email"], "wrong password!"), 400)
    assert (await login(agent, user["email"])).status == 200


async def test_repeated_failures_throttle_the_address(make_agent: object) -> None:
    agent: Agent = await make_agent(login_failures_per_address=4)  # type: ignore[operator]
    user = await create_user(agent)
    for n in range(4):
        await error_of(await login(agent, f"spray-{n}@farm.test", "wrong password!"), 400)
    resp = await login(agent, user["email"])
    await error_of(resp, 429)
    assert int(resp.headers["Retry-After"]) >= 1


async def test_a_suspended_user_is_refused_at_once(agent: Agent) -> None:
    user = await create_user(agent)
    tokens = await tokens_of(agent, user["email"])
    resp = await agent.client.put(
        f"/api/v1/users/{user['id']}", json={"status": "suspended"}, headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.get("/auth/verify", headers=agent.auth(str(tokens["access_token"])))
    await error_of(resp, 401)
    await error_of(await login(agent, user["email"]), 400)


async def test_a_stale_access_token_does_not_stop_a_refresh_or_a_login(agent: Agent) -> None:
    user = await create_user(agent)
    first = await tokens_of(agent, user["email"])
    stale = agent.auth("not-a-token")  # sent by a client that still holds its old token
    resp = await agent.client.post(
        "/auth/refresh", json={"refresh_token": first["refresh_token"]}, headers=stale
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.post(
        "/api/v1/login", json={"email": user["email"], "password": PASSWORD}, headers=stale
    )
    assert resp.status == 200, await resp.text()
    # An endpoint that needs a caller still refuses the bad token.
    await error_of(await agent.client.get("/auth/verify", headers=stale), 401)
