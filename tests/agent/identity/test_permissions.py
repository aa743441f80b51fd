"""Per-farm permissions: grant, list, revoke (docs/design.md section 4)."""

from __future__ import annotations

from typing import Any

from tests.agent.identity.conftest import create_farm, create_user, error_of, tokens_of
from tests.conftest import Agent


async def grant(
    agent: Agent, user_id: str, farm_id: str, kind: str = "read_only", token: str | None = None
) -> Any:
    body = {"user_id": user_id, "farm_id": farm_id, "permission_type": kind}
    return await agent.client.post("/api/v1/permissions/", json=body, headers=agent.auth(token))


async def test_a_grant_shows_the_farm_and_its_revocation_hides_it_at_once(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    user = await create_user(agent)
    token = (await tokens_of(agent, user["email"]))["access_token"]
    path = f"/api/v1/farms/{farm_id}"
    await error_of(await agent.client.get(path, headers=agent.auth(token)), 404)

    resp = await grant(agent, user["id"], farm_id)
    permission = await resp.json()
    assert resp.status == 201, permission
    assert permission["resource_type"] == "farm" and permission["granted_by"]
    assert (await agent.client.get(path, headers=agent.auth(token))).status == 200
    await error_of(await grant(agent, user["id"], farm_id, "read_write"), 409)

    resp = await agent.client.delete(
        f"/api/v1/permissions/{permission['id']}", headers=agent.auth()
    )
    assert resp.status == 204
    await error_of(await agent.client.get(path, headers=agent.auth(token)), 404)


async def test_list_filters_and_shows_users_only_their_own(agent: Agent) -> None:
    north, south = await create_farm(agent), await create_farm(agent, "South")
    ann = await create_user(agent, farms_access=[north, south])
    await create_user(agent, farms_access=[north])
    resp = await agent.client.get(f"/api/v1/permissions/?farm_id={north}", headers=agent.auth())
    assert (await resp.json())["total"] == 3  # the two users' and the admin's, as its creator
    resp = await agent.client.get(
        "/api/v1/permissions/?permission_type=read_write", headers=agent.auth()
    )
    assert (await resp.json())["total"] == 2  # the creator's grants on both farms
    token = (await tokens_of(agent, ann["email"]))["access_token"]
    resp = await agent.client.get("/api/v1/permissions/", headers=agent.auth(token))
    mine = await resp.json()
    assert {p["user_id"] for p in mine["permissions"]} == {ann["id"]} and mine["total"] == 2
    resp = await agent.client.get("/api/v1/permissions/?user_id=nope", headers=agent.auth())
    await error_of(resp, 422)


async def test_farm_managers_share_only_the_farms_they_write(agent: Agent) -> None:
    manager = await create_user(agent, "farm_manager")
    token = (await tokens_of(agent, manager["email"]))["access_token"]
    own = await create_farm(agent, "Own", token=token)
    foreign = await create_farm(agent, "Foreign")
    read_only = await create_farm(agent, "Read only")
    assert (await grant(agent, manager["id"], read_only)).status == 201
    operator = await create_user(agent, "operator")

    resp = await grant(agent, operator["id"], own, "read_write", token)
    assert resp.status == 201, await resp.text()
    await error_of(await grant(agent, operator["id"], foreign, token=token), 404)
    await error_of(await grant(agent, operator["id"], read_only, token=token), 403)
    resp = await agent.client.get("/api/v1/permissions/", headers=agent.auth(token))
    assert {p["farm_id"] for p in (await resp.json())["permissions"]} == {own, read_only}


async def test_operators_may_not_grant(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    operator = await create_user(agent, "operator", farms_access=[farm_id])
    token = (await tokens_of(agent, operator["email"]))["access_token"]
    other = await create_user(agent)
    await error_of(await grant(agent, other["id"], farm_id, token=token), 403)
    mine = await (await agent.client.get("/api/v1/permissions/", headers=agent.auth(token))).json()
    resp = await agent.client.delete(
        f"/api/v1/permissions/{mine['permissions'][0]['id']}", headers=agent.auth(token)
    )
    await error_of(resp, 403)


async def test_grants_need_an_existing_user_and_farm(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    user = await create_user(agent)
    missing = "00000000-0000-4000-8000-000000000000"
    await error_of(await grant(agent, missing, farm_id), 404)
    await error_of(await grant(agent, user["id"], missing), 404)
    await error_of(await grant(agent, user["id"], farm_id, "owner"), 422)
    resp = await agent.client.delete(f"/api/v1/permissions/{missing}", headers=agent.auth())
    await error_of(resp, 404)


async def test_the_creators_access_is_an_ordinary_grant_an_admin_can_change(
    agent: Agent,
) -> None:
    manager = await create_user(agent, "farm_manager")
    token = (await tokens_of(agent, manager["email"]))["access_token"]
    farm = await create_farm(agent, "Own", token=token)
    resp = await agent.client.get(
        f"/api/v1/permissions/?user_id={manager['id']}", headers=agent.auth()
    )
    (grant,) = (await resp.json())["permissions"]
    assert (grant["farm_id"], grant["permission_type"]) == (farm, "read_write")

    resp = await agent.client.post(
        "/api/v1/users/permissions",
        json={
            "user_id": manager["id"],
            "permissions": [{"farm_id": farm, "permission_type": "read_only"}],
        },
        headers=agent.auth(),
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.put(
        f"/api/v1/farms/{farm}", json={"name": "Renamed"}, headers=agent.auth(token)
    )
    await error_of(resp, 403)
    assert (
        await agent.client.get(f"/api/v1/farms/{farm}", headers=agent.auth(token))
    ).status == 200

    resp = await agent.client.post(
        "/api/v1/users/permissions",
        json={"user_id": manager["id"], "permissions": []},
        headers=agent.auth(),
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.get(f"/api/v1/farms/{farm}", headers=agent.auth(token))
    await error_of(resp, 404)
