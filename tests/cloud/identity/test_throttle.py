"""Login throttling on the cloud: 429 and Retry-After per address and account (docs/design.md 4)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tests.cloud.identity.conftest import Cloud, Conn, User, error_of, login


async def test_failures_from_one_address_throttle_it_with_retry_after(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User, system: Conn
) -> None:
    cloud = await make_cloud(login_failures_per_address=3, login_failure_window_s=600)
    for n in range(3):
        assert (await login(cloud, f"nobody{n}@example.com", "guess")).status == 400
    # Now even the right password from that address waits.
    resp = await login(cloud, user.email)
    error = await error_of(resp, 429)
    assert error["code"] == "RATE_LIMITED"
    assert 590 <= int(resp.headers["Retry-After"]) <= 600
    assert error["details"]["retry_after"] == int(resp.headers["Retry-After"])
    assert (
        await system.fetchval(
            "SELECT count(*) FROM auth_events WHERE event_type = 'login_throttled'"
        )
        == 1
    )


async def test_failures_of_one_account_throttle_only_that_account(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User, system: Conn
) -> None:
    cloud = await make_cloud(login_throttle_per_account=2)
    for _ in range(2):
        assert (await login(cloud, user.email.upper(), "guess")).status == 400
    assert (await login(cloud, user.email)).status == 429
    other = await system.fetchval(
        "INSERT INTO users (email, password_hash, email_verified)"
        " SELECT 'ok@example.com', password_hash, true FROM users WHERE id = $1 RETURNING email",
        user.id,
    )
    assert (await login(cloud, other)).status == 200
    # The window passing lifts it.
    await system.execute("UPDATE auth_events SET created_at = created_at - interval '1 hour'")
    assert (await login(cloud, user.email)).status == 200


async def test_a_successful_login_restarts_the_count_of_the_account(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User
) -> None:
    cloud = await make_cloud(login_throttle_per_account=2)
    assert (await login(cloud, user.email, "guess")).status == 400
    assert (await login(cloud, user.email)).status == 200
    assert (await login(cloud, user.email, "guess")).status == 400
    assert (await login(cloud, user.email)).status == 200


async def test_wrong_mfa_codes_count_as_failed_logins(
    make_cloud: Callable[..., Awaitable[Cloud]], user: User
) -> None:
    cloud = await make_cloud(login_throttle_per_account=2)
    token = (await (await login(cloud, user.email)).json())["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert (await cloud.client.post("/auth/mfa/enrol", headers=headers)).status == 200
    for _ in range(2):
        resp = await cloud.client.post(
            "/auth/mfa/confirm", json={"code": "000000"}, headers=headers
        )
        assert resp.status == 400
    resp = await cloud.client.post("/auth/mfa/confirm", json={"code": "000000"}, headers=headers)
    assert resp.status == 429
