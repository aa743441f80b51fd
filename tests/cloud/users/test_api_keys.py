"""API keys on the cloud: admins create, list and revoke them; ``X-API-Key`` acts as the key's
user until the key is revoked or the user suspended."""

from __future__ import annotations

from typing import Any

from tests.cloud.api.conftest import Cloud, Conn, World, assert_error
from tests.cloud.users.conftest import answer, bearer

KEY_FIELDS = {
    "id",
    "user_id",
    "name",
    "prefix",
    "created_by",
    "created_at",
    "last_used_at",
    "revoked_at",
}


async def create_key(
    cloud: Cloud, admin: str, user_id: str, name: str = "greenhouse"
) -> dict[str, Any]:
    resp = await cloud.client.post(
        "/api/v1/api-keys", json={"user_id": user_id, "name": name}, headers=bearer(admin)
    )
    body: dict[str, Any] = await answer(resp, 201)
    return body


async def test_a_key_acts_as_its_user_until_revoked(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    created = await create_key(cloud, admin, str(world.users["rita"]))
    assert set(created) == KEY_FIELDS | {"key"}
    assert created["key"].startswith("fk_") and created["key"].startswith(created["prefix"])
    assert created["created_by"] == str(world.users["admin"])
    headers = {"X-API-Key": created["key"]}

    resp = await cloud.client.get("/api/v1/users/profile", headers=headers)
    assert (await answer(resp, 200))["email"] == world.email("rita")
    # With rita's role: not an admin.
    resp = await cloud.client.get("/api/v1/users/", headers=headers)
    assert_error(await answer(resp, 403), "FORBIDDEN")
    # And rita's farms only (row-level security, through the key's user).
    resp = await cloud.client.get("/api/v1/farms/", headers=headers)
    farms = (await answer(resp, 200))["farms"]
    assert [f["id"] for f in farms] == [str(world.farm_a.farm_id)]

    resp = await cloud.client.get("/api/v1/api-keys", headers=bearer(admin))
    listed = await answer(resp, 200)
    assert listed["total"] == 1
    (key,) = listed["api_keys"]
    assert set(key) == KEY_FIELDS and key["last_used_at"] is not None

    resp = await cloud.client.delete(f"/api/v1/api-keys/{created['id']}", headers=bearer(admin))
    assert resp.status == 204
    resp = await cloud.client.get("/api/v1/users/profile", headers=headers)
    assert_error(await answer(resp, 401), "UNAUTHORIZED")
    resp = await cloud.client.get("/api/v1/api-keys", headers=bearer(admin))
    assert (await answer(resp, 200))["total"] == 0
    resp = await cloud.client.get(
        "/api/v1/api-keys", params={"include_revoked": "true"}, headers=bearer(admin)
    )
    assert (await answer(resp, 200))["api_keys"][0]["revoked_at"] is not None


async def test_unknown_keys_and_suspended_users_are_refused(cloud: Cloud, world: World) -> None:
    resp = await cloud.client.get("/api/v1/users/profile", headers={"X-API-Key": "fk_nonsense"})
    assert_error(await answer(resp, 401), "UNAUTHORIZED")
    admin = await cloud.login(world.email("admin"))
    created = await create_key(cloud, admin, str(world.users["will"]))
    resp = await cloud.client.put(
        f"/api/v1/users/{world.users['will']}", json={"status": "suspended"}, headers=bearer(admin)
    )
    await answer(resp, 200)
    resp = await cloud.client.get("/api/v1/users/profile", headers={"X-API-Key": created["key"]})
    assert_error(await answer(resp, 401), "UNAUTHORIZED")


async def test_an_expired_key_is_refused(cloud: Cloud, world: World, system: Conn) -> None:
    admin = await cloud.login(world.email("admin"))
    created = await create_key(cloud, admin, str(world.users["rita"]))
    await system.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1::uuid",
        created["id"],
    )
    resp = await cloud.client.get("/api/v1/users/profile", headers={"X-API-Key": created["key"]})
    assert_error(await answer(resp, 401), "UNAUTHORIZED")


async def test_only_admins_manage_keys(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    created = await create_key(cloud, admin, str(world.users["alice"]))
    manager = await cloud.login(world.email("alice"))
    resp = await cloud.client.post(
        "/api/v1/api-keys",
        json={"user_id": str(world.users["alice"]), "name": "mine"},
        headers=bearer(manager),
    )
    assert_error(await answer(resp, 403), "FORBIDDEN")
    resp = await cloud.client.get("/api/v1/api-keys", headers=bearer(manager))
    assert_error(await answer(resp, 403), "FORBIDDEN")
    resp = await cloud.client.delete(f"/api/v1/api-keys/{created['id']}", headers=bearer(manager))
    assert_error(await answer(resp, 403), "FORBIDDEN")
    missing = "00000000-0000-4000-8000-000000000000"
    resp = await cloud.client.post(
        "/api/v1/api-keys", json={"user_id": missing, "name": "x"}, headers=bearer(admin)
    )
    assert_error(await answer(resp, 404), "RESOURCE_NOT_FOUND")
    resp = await cloud.client.delete(f"/api/v1/api-keys/{missing}", headers=bearer(admin))
    assert_error(await answer(resp, 404), "RESOURCE_NOT_FOUND")
    resp = await cloud.client.post(
        "/api/v1/api-keys", json={"user_id": missing}, headers=bearer(admin)
    )
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")


async def test_key_changes_are_in_the_auth_event_log(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    created = await create_key(cloud, admin, str(world.users["rita"]))
    await cloud.client.delete(f"/api/v1/api-keys/{created['id']}", headers=bearer(admin))
    resp = await cloud.client.get(
        "/api/v1/auth-events",
        params={"user_id": str(world.users["rita"])},
        headers=bearer(admin),
    )
    body = await answer(resp, 200)
    assert [e["kind"] for e in body["auth_events"]] == ["api_key_revoked", "api_key_created"]
    assert body["auth_events"][0]["detail"]["key_id"] == created["id"]
    resp = await cloud.client.get(
        "/api/v1/auth-events", params={"kind": "login_ok"}, headers=bearer(admin)
    )
    assert (await answer(resp, 200))["total"] == 1
    rita = await cloud.login(world.email("rita"))
    resp = await cloud.client.get("/api/v1/auth-events", headers=bearer(rita))
    assert_error(await answer(resp, 403), "FORBIDDEN")
