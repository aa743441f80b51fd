"""The web app's cookie session: the refresh token only in an httpOnly cookie, a CSRF header for
the cookie refresh, and the bearer contract unchanged for every other client."""

from __future__ import annotations

from typing import Any

from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Agent

BROWSER = {"X-Session-Cookie": "1"}


async def browser_login(agent: Agent) -> dict[str, Any]:
    resp = await agent.client.post(
        "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}, headers=BROWSER
    )
    assert resp.status == 200, await resp.text()
    refresh = resp.cookies["farm_refresh"]
    assert refresh["httponly"] and refresh["samesite"] == "Strict" and refresh["path"] == "/auth/"
    assert not resp.cookies["farm_csrf"]["httponly"]  # the page must read it to send the header
    assert resp.headers["Cache-Control"] == "no-store"
    body: dict[str, Any] = await resp.json()
    return body


def csrf(agent: Agent) -> str:
    return next(c.value for c in agent.client.session.cookie_jar if c.key == "farm_csrf")


async def test_a_browser_login_keeps_the_refresh_token_out_of_reach_of_scripts(
    agent: Agent,
) -> None:
    body = await browser_login(agent)
    assert body["refresh_token"] == ""
    assert body["access_token"] and body["user"]["email"] == ADMIN_EMAIL


async def test_the_cookie_refreshes_with_the_csrf_header_and_rotates(agent: Agent) -> None:
    await browser_login(agent)
    resp = await agent.client.post(
        "/auth/refresh", json={}, headers={**BROWSER, "X-CSRF-Token": csrf(agent)}
    )
    body = await resp.json()
    assert resp.status == 200, body
    assert body["refresh_token"] == "" and body["access_token"]
    again = await agent.client.post(
        "/auth/refresh", json={}, headers={**BROWSER, "X-CSRF-Token": csrf(agent)}
    )
    assert again.status == 200  # the rotated cookie came back with the first answer


async def test_a_cookie_refresh_without_the_csrf_header_is_refused(agent: Agent) -> None:
    await browser_login(agent)
    resp = await agent.client.post("/auth/refresh", json={})
    assert resp.status == 403
    assert "X-CSRF-Token" in (await resp.json())["error"]["message"]
    wrong = await agent.client.post("/auth/refresh", json={}, headers={"X-CSRF-Token": "guess"})
    assert wrong.status == 403


async def test_a_cookie_refresh_from_another_origin_is_refused(agent: Agent) -> None:
    await browser_login(agent)
    resp = await agent.client.post(
        "/auth/refresh",
        json={},
        headers={"X-CSRF-Token": csrf(agent), "Origin": "http://evil.example"},
    )
    assert resp.status == 403


async def test_no_token_and_no_cookie_is_a_clear_401(agent: Agent) -> None:
    resp = await agent.client.post("/auth/refresh", json={})
    assert resp.status == 401
    assert "Not signed in" in (await resp.json())["error"]["message"]


async def test_sign_out_ends_the_session_and_clears_the_cookies(agent: Agent) -> None:
    body = await browser_login(agent)
    token = csrf(agent)
    resp = await agent.client.post(
        "/auth/logout", headers={"Authorization": f"Bearer {body['access_token']}"}
    )
    assert resp.status == 204
    assert resp.cookies["farm_refresh"].value == "" and resp.cookies["farm_csrf"].value == ""
    after = await agent.client.post("/auth/refresh", json={}, headers={"X-CSRF-Token": token})
    assert after.status == 401


async def test_other_clients_keep_the_bearer_contract(agent: Agent) -> None:
    resp = await agent.client.post(
        "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
    )
    body = await resp.json()
    assert body["refresh_token"].startswith("rt_") and "farm_refresh" not in resp.cookies
    again = await agent.client.post("/auth/refresh", json={"refresh_token": body["refresh_token"]})
    assert again.status == 200 and (await again.json())["refresh_token"].startswith("rt_")
