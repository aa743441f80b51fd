"""/api/v1/users on the cloud: the agent's endpoints and answers, with PostgreSQL confining the
data (docs/design.md section 12)."""

from __future__ import annotations

from typing import Any

from protocol.tokens import hash_secret, new_secret
from tests.cloud.api.conftest import PASSWORD, Cloud, Conn, World, assert_error
from tests.cloud.users.conftest import answer, bearer

USER_FIELDS = {
    "id",
    "email",
    "full_name",
    "role",
    "status",
    "plan",
    "email_verified",
    "mfa_enabled",
    "last_login",
    "created_at",
    "updated_at",
    "farms_access",
}
NEW_PASSWORD = "a brand new passphrase 42"


async def test_admin_lists_users_with_their_farms_filtered_and_paged(
    cloud: Cloud, world: World
) -> None:
    token = await cloud.login(world.email("admin"))
    resp = await cloud.client.get("/api/v1/users/", headers=bearer(token))
    body = await answer(resp, 200)
    assert body["total"] == 6 and body["limit"] == 50 and body["offset"] == 0
    assert [u["email"] for u in body["users"]] == sorted(world.email(n) for n in world.users)
    rita = next(u for u in body["users"] if u["email"] == world.email("rita"))
    assert set(rita) == USER_FIELDS
    assert rita["farms_access"] == [str(world.farm_a.farm_id)]
    assert rita["id"] == str(world.users["rita"]) and rita["created_at"].endswith("Z")

    resp = await cloud.client.get(
        "/api/v1/users", params={"role": "farm_manager", "limit": "1"}, headers=bearer(token)
    )
    body = await answer(resp, 200)
    assert body["total"] == 2 and [u["email"] for u in body["users"]] == [world.email("alice")]


async def test_only_admins_list_users_and_callers_must_authenticate(
    cloud: Cloud, world: World
) -> None:
    token = await cloud.login(world.email("alice"))
    resp = await cloud.client.get("/api/v1/users/", headers=bearer(token))
    assert_error(await answer(resp, 403), "FORBIDDEN")
    resp = await cloud.client.get("/api/v1/users/")
    assert_error(await answer(resp, 401), "UNAUTHORIZED")


async def test_admin_creates_a_user_who_can_then_log_in(cloud: Cloud, world: World) -> None:
    token = await cloud.login(world.email("admin"))
    payload: dict[str, Any] = {
        "email": "olga@example.com",
        "password": NEW_PASSWORD,
        "role": "operator",
        "full_name": "Olga",
        "farms_access": [str(world.farm_b.farm_id)],
    }
    resp = await cloud.client.post("/api/v1/users/", json=payload, headers=bearer(token))
    created = await answer(resp, 201)
    assert set(created) == USER_FIELDS
    assert created["role"] == "operator" and created["full_name"] == "Olga"
    assert created["farms_access"] == [str(world.farm_b.farm_id)]
    olga = await cloud.login("olga@example.com", NEW_PASSWORD)
    # An operator's farms_access grant is read_write (the same rule as on the agent).
    resp = await cloud.client.get("/api/v1/permissions/", headers=bearer(olga))
    grants = (await answer(resp, 200))["permissions"]
    assert [(g["farm_id"], g["permission_type"]) for g in grants] == [
        (str(world.farm_b.farm_id), "read_write")
    ]

    again = await cloud.client.post(
        "/api/v1/users/",
        json={**payload, "email": "OLGA@example.com"},
        headers=bearer(token),
    )
    assert_error(await answer(again, 409), "RESOURCE_EXISTS")


async def test_creating_a_user_checks_input_and_role(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    unknown_farm = "00000000-0000-4000-8000-000000000000"
    resp = await cloud.client.post(
        "/api/v1/users/",
        json={"email": "x@example.com", "password": NEW_PASSWORD, "farms_access": [unknown_farm]},
        headers=bearer(admin),
    )
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")
    resp = await cloud.client.post(
        "/api/v1/users/",
        json={"email": "x@example.com", "password": "short"},
        headers=bearer(admin),
    )
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")
    manager = await cloud.login(world.email("alice"))
    resp = await cloud.client.post(
        "/api/v1/users/",
        json={"email": "x@example.com", "password": NEW_PASSWORD},
        headers=bearer(manager),
    )
    assert_error(await answer(resp, 403), "FORBIDDEN")
    resp = await cloud.client.get("/api/v1/users/", headers=bearer(admin))
    assert (await answer(resp, 200))["total"] == 6


async def test_a_user_reads_themselves_but_not_others(cloud: Cloud, world: World) -> None:
    token = await cloud.login(world.email("rita"))
    me = str(world.users["rita"])
    resp = await cloud.client.get(f"/api/v1/users/{me}", headers=bearer(token))
    assert (await answer(resp, 200))["email"] == world.email("rita")
    resp = await cloud.client.get(f"/api/v1/users/{world.users['alice']}", headers=bearer(token))
    assert_error(await answer(resp, 403), "FORBIDDEN")
    admin = await cloud.login(world.email("admin"))
    missing = "00000000-0000-4000-8000-000000000000"
    resp = await cloud.client.get(f"/api/v1/users/{missing}", headers=bearer(admin))
    assert_error(await answer(resp, 404), "RESOURCE_NOT_FOUND")
    resp = await cloud.client.get("/api/v1/users/not-a-uuid", headers=bearer(admin))
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")


async def test_suspending_a_user_ends_their_sessions_at_once(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    will = await cloud.login(world.email("will"))
    resp = await cloud.client.put(
        f"/api/v1/users/{world.users['will']}",
        json={"status": "suspended", "full_name": "Will"},
        headers=bearer(admin),
    )
    body = await answer(resp, 200)
    assert body["status"] == "suspended" and body["full_name"] == "Will"
    resp = await cloud.client.get("/api/v1/users/profile", headers=bearer(will))
    assert_error(await answer(resp, 401), "UNAUTHORIZED")
    resp = await cloud.client.post(
        "/api/v1/login", json={"email": world.email("will"), "password": PASSWORD}
    )
    assert_error(await answer(resp, 400), "INVALID_CREDENTIALS")


async def test_admin_changes_email_role_and_farms(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    nora = world.users["nora"]
    resp = await cloud.client.put(
        f"/api/v1/users/{nora}",
        json={
            "email": "nora.new@example.com",
            "role": "operator",
            "farms_access": [str(world.farm_a.farm_id)],
        },
        headers=bearer(admin),
    )
    body = await answer(resp, 200)
    assert body["email"] == "nora.new@example.com" and body["role"] == "operator"
    assert body["farms_access"] == [str(world.farm_a.farm_id)]
    assert body["email_verified"] is False
    resp = await cloud.client.put(
        f"/api/v1/users/{nora}", json={"email": world.email("alice")}, headers=bearer(admin)
    )
    assert_error(await answer(resp, 409), "RESOURCE_EXISTS")
    resp = await cloud.client.put(f"/api/v1/users/{nora}", json={}, headers=bearer(admin))
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")


async def test_the_last_admin_cannot_be_demoted_or_deleted(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    me = world.users["admin"]
    resp = await cloud.client.put(
        f"/api/v1/users/{me}", json={"role": "user"}, headers=bearer(admin)
    )
    assert_error(await answer(resp, 400), "BAD_REQUEST")
    resp = await cloud.client.delete(f"/api/v1/users/{me}", headers=bearer(admin))
    assert_error(await answer(resp, 400), "BAD_REQUEST")


async def test_admin_deletes_a_user(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    rita = await cloud.login(world.email("rita"))
    path = f"/api/v1/users/{world.users['rita']}"
    resp = await cloud.client.delete(path, headers=bearer(admin))
    assert resp.status == 204
    resp = await cloud.client.get(path, headers=bearer(admin))
    assert_error(await answer(resp, 404), "RESOURCE_NOT_FOUND")
    resp = await cloud.client.get("/api/v1/users/profile", headers=bearer(rita))
    assert resp.status == 401
    resp = await cloud.client.delete(path, headers=bearer(admin))
    assert_error(await answer(resp, 404), "RESOURCE_NOT_FOUND")
    manager = await cloud.login(world.email("alice"))
    resp = await cloud.client.delete(f"/api/v1/users/{world.users['bob']}", headers=bearer(manager))
    assert_error(await answer(resp, 403), "FORBIDDEN")


async def test_profile_password_change_needs_the_current_one_and_ends_other_sessions(
    cloud: Cloud, world: World
) -> None:
    email = world.email("rita")
    current = await cloud.login(email)
    other = await cloud.login(email)
    resp = await cloud.client.get("/api/v1/users/profile", headers=bearer(current))
    assert set(await answer(resp, 200)) == USER_FIELDS
    resp = await cloud.client.put(
        "/api/v1/users/profile",
        json={"password": NEW_PASSWORD, "current_password": "wrong password!"},
        headers=bearer(current),
    )
    assert resp.status == 400
    resp = await cloud.client.put(
        "/api/v1/users/profile", json={"password": NEW_PASSWORD}, headers=bearer(current)
    )
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")
    resp = await cloud.client.put(
        "/api/v1/users/profile",
        json={"password": NEW_PASSWORD, "current_password": PASSWORD},
        headers=bearer(current),
    )
    await answer(resp, 200)
    resp = await cloud.client.get("/api/v1/users/profile", headers=bearer(current))
    assert resp.status == 200
    resp = await cloud.client.get("/api/v1/users/profile", headers=bearer(other))
    assert resp.status == 401
    await cloud.login(email, NEW_PASSWORD)


async def test_a_user_renames_themselves_but_cannot_change_their_role(
    cloud: Cloud, world: World
) -> None:
    token = await cloud.login(world.email("nora"))
    resp = await cloud.client.put(
        "/api/v1/users/profile", json={"full_name": "Nora N."}, headers=bearer(token)
    )
    assert (await answer(resp, 200))["full_name"] == "Nora N."
    resp = await cloud.client.put(
        "/api/v1/users/profile", json={"role": "admin"}, headers=bearer(token)
    )
    assert_error(await answer(resp, 422), "VALIDATION_ERROR")


async def test_admin_sets_role_and_grants_and_users_see_their_own_permissions(
    cloud: Cloud, world: World
) -> None:
    admin = await cloud.login(world.email("admin"))
    nora = str(world.users["nora"])
    resp = await cloud.client.post(
        "/api/v1/users/permissions",
        json={
            "user_id": nora,
            "role": "analyst",
            "permissions": [{"farm_id": str(world.farm_b.farm_id), "permission_type": "read_only"}],
        },
        headers=bearer(admin),
    )
    assert (await answer(resp, 200))["farms_access"] == [str(world.farm_b.farm_id)]
    token = await cloud.login(world.email("nora"))
    resp = await cloud.client.get("/api/v1/permissions/", headers=bearer(token))
    body = await answer(resp, 200)
    assert body["total"] == 1 and body["permissions"][0]["user_id"] == nora
    assert set(body["permissions"][0]) == {
        "id",
        "user_id",
        "farm_id",
        "permission_type",
        "resource_type",
        "granted_at",
        "granted_by",
    }
    resp = await cloud.client.get("/api/v1/permissions/", headers=bearer(admin))
    # Rita's, Will's, Nora's, and the grants Alice and Bob got as their farms' creators.
    assert (await answer(resp, 200))["total"] == 5
    resp = await cloud.client.post(
        "/api/v1/users/permissions", json={"user_id": nora, "role": "admin"}, headers=bearer(token)
    )
    assert_error(await answer(resp, 403), "FORBIDDEN")


async def test_admin_grants_and_revokes_a_farm_permission(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    grant = {
        "user_id": str(world.users["nora"]),
        "farm_id": str(world.farm_b.farm_id),
        "permission_type": "read_only",
    }
    resp = await cloud.client.post("/api/v1/permissions/", json=grant, headers=bearer(admin))
    created = await answer(resp, 201)
    assert created["granted_by"] == str(world.users["admin"])
    assert created["resource_type"] == "farm"
    nora = await cloud.login(world.email("nora"))
    resp = await cloud.client.get("/api/v1/farms/", headers=bearer(nora))
    assert [f["id"] for f in (await answer(resp, 200))["farms"]] == [str(world.farm_b.farm_id)]

    resp = await cloud.client.post("/api/v1/permissions/", json=grant, headers=bearer(admin))
    assert_error(await answer(resp, 409), "RESOURCE_EXISTS")
    # Creators share nothing on the cloud: only admins write grants (docs/cloud-rls.md).
    bob = await cloud.login(world.email("bob"))
    resp = await cloud.client.post("/api/v1/permissions/", json=grant, headers=bearer(bob))
    assert_error(await answer(resp, 403), "FORBIDDEN")

    path = f"/api/v1/permissions/{created['id']}"
    resp = await cloud.client.delete(path, headers=bearer(bob))
    assert_error(await answer(resp, 403), "FORBIDDEN")
    resp = await cloud.client.delete(path, headers=bearer(admin))
    assert resp.status == 204
    resp = await cloud.client.get("/api/v1/farms/", headers=bearer(nora))
    assert (await answer(resp, 200))["farms"] == []
    resp = await cloud.client.delete(path, headers=bearer(admin))
    assert_error(await answer(resp, 404), "RESOURCE_NOT_FOUND")


async def test_a_new_address_in_the_profile_needs_the_password_and_verification(
    cloud: Cloud, world: World, system: Conn
) -> None:
    token = await cloud.login(world.email("rita"))
    await system.execute(
        "UPDATE users SET email_verified = true WHERE id = $1", world.users["rita"]
    )
    resp = await cloud.client.put(
        "/api/v1/users/profile",
        json={"email": "rita.new@example.com", "current_password": PASSWORD},
        headers=bearer(token),
    )
    body = await answer(resp, 200)
    assert body["email"] == "rita.new@example.com" and body["email_verified"] is False
    mailed = await system.fetchval(
        "SELECT count(*) FROM one_time_tokens WHERE user_id = $1 AND purpose = 'verify_email'",
        world.users["rita"],
    )
    assert mailed == 1
    await cloud.login("rita.new@example.com")


async def test_a_reset_mailed_to_the_old_address_dies_when_the_address_changes(
    cloud: Cloud, world: World, system: Conn
) -> None:
    secret = new_secret("rp_")
    await system.execute(
        "INSERT INTO one_time_tokens (user_id, purpose, token_hash, expires_at)"
        " VALUES ($1, 'reset_password', $2, now() + interval '1 hour')",
        world.users["rita"],
        bytes.fromhex(hash_secret(secret)),
    )
    token = await cloud.login(world.email("rita"))
    resp = await cloud.client.put(
        "/api/v1/users/profile",
        json={"email": "rita.moved@example.com", "current_password": PASSWORD},
        headers=bearer(token),
    )
    await answer(resp, 200)
    resp = await cloud.client.post(
        "/auth/reset-password/confirm",
        json={"token": secret, "new_password": "an attacker's password"},
    )
    assert resp.status == 400, await resp.text()
    await cloud.login("rita.moved@example.com")  # the password is still hers
