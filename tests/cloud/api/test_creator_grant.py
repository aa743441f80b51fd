"""A farm's creator reaches it through an ordinary grant, made with the farm, that an admin
reduces or revokes through the API like any other (issue 9; docs/cloud-rls.md)."""

from __future__ import annotations

from tests.cloud.api.conftest import Cloud, World, assert_error


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_an_admin_reduces_then_revokes_the_creators_grant(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(world.email("admin"))
    alice = await cloud.login(world.email("alice"))
    farm_a = str(world.farm_a.farm_id)
    status, body = await cloud.get("/api/v1/permissions/", alice)
    assert status == 200, body
    (creator_grant,) = body["permissions"]
    assert (creator_grant["farm_id"], creator_grant["permission_type"]) == (farm_a, "read_write")
    assert creator_grant["granted_by"] == str(world.users["alice"])

    resp = await cloud.client.post(
        "/api/v1/users/permissions",
        json={
            "user_id": str(world.users["alice"]),
            "permissions": [{"farm_id": farm_a, "permission_type": "read_only"}],
        },
        headers=_bearer(admin),
    )
    assert resp.status == 200, await resp.text()
    status, body = await cloud.get("/api/v1/permissions/", alice)
    assert [(g["farm_id"], g["permission_type"]) for g in body["permissions"]] == [
        (farm_a, "read_only")
    ]
    status, _ = await cloud.get(f"/api/v1/farms/{farm_a}", alice)
    assert status == 200  # reduced, still readable

    resp = await cloud.client.delete(
        f"/api/v1/permissions/{creator_grant['id']}", headers=_bearer(admin)
    )
    assert resp.status == 204
    status, body = await cloud.get(f"/api/v1/farms/{farm_a}", alice)
    assert status == 404
    assert_error(body, "RESOURCE_NOT_FOUND")
    status, body = await cloud.get("/api/v1/farms/", alice)
    assert body["farms"] == []
