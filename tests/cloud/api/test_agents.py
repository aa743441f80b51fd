"""/api/v1/agents: admins create, list and revoke agents; owners see theirs; a revoked agent's
pairing code and batches are refused."""

from __future__ import annotations

import base64
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.cloud.api.conftest import Cloud, World, assert_error


def _public_key() -> str:
    raw = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def _create(cloud: Cloud, token: str, name: str, owner_id: str) -> dict[str, Any]:
    resp = await cloud.client.post(
        "/api/v1/agents",
        json={"name": name, "owner_id": owner_id},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert resp.status == 201, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def test_admin_lists_every_agent_and_an_owner_only_theirs(cloud: Cloud, world: World) -> None:
    admin = await cloud.login("admin@example.com")
    north = await _create(cloud, admin, "North site", str(world.users["alice"]))
    south = await _create(cloud, admin, "South site", str(world.users["bob"]))
    resp = await cloud.client.post(
        "/api/v1/agents/pair", json={"code": north["pairing_code"], "public_key": _public_key()}
    )
    assert resp.status == 200

    status, body = await cloud.get("/api/v1/agents", admin)
    assert status == 200
    assert body["total"] == 2
    by_name = {agent["name"]: agent for agent in body["agents"]}
    assert by_name["North site"]["paired"] is True
    assert by_name["North site"]["pairing_expires_at"] is None
    assert by_name["South site"]["paired"] is False
    assert by_name["South site"]["pairing_expires_at"] is not None
    assert by_name["South site"]["acked_seq"] == 0
    assert "pairing_code" not in by_name["South site"]

    status, body = await cloud.get("/api/v1/agents", await cloud.login("alice@example.com"))
    assert status == 200
    assert [agent["id"] for agent in body["agents"]] == [north["id"]]

    status, body = await cloud.get("/api/v1/agents", await cloud.login("nora@example.com"))
    assert (status, body["total"], body["agents"]) == (200, 0, [])
    assert south["id"] not in {agent["id"] for agent in body["agents"]}


async def test_revoking_kills_the_pairing_code_and_only_admins_may(
    cloud: Cloud, world: World
) -> None:
    admin = await cloud.login("admin@example.com")
    agent = await _create(cloud, admin, "Roof site", str(world.users["alice"]))
    alice = {"Authorization": f"Bearer {await cloud.login('alice@example.com')}"}

    resp = await cloud.client.delete(f"/api/v1/agents/{agent['id']}", headers=alice)
    assert resp.status == 403
    assert_error(await resp.json(), "FORBIDDEN")

    headers = {"Authorization": f"Bearer {admin}"}
    for _ in range(2):  # revoking twice is harmless
        resp = await cloud.client.delete(f"/api/v1/agents/{agent['id']}", headers=headers)
        assert resp.status == 204

    resp = await cloud.client.post(
        "/api/v1/agents/pair", json={"code": agent["pairing_code"], "public_key": _public_key()}
    )
    assert resp.status == 404

    status, body = await cloud.get("/api/v1/agents", admin, revoked="true")
    assert status == 200
    assert [(a["id"], a["revoked_at"] is not None) for a in body["agents"]] == [(agent["id"], True)]
    status, body = await cloud.get("/api/v1/agents", admin, revoked="false")
    assert body["total"] == 0


async def test_revoking_an_unknown_agent_is_a_404(cloud: Cloud, world: World) -> None:
    headers = {"Authorization": f"Bearer {await cloud.login('admin@example.com')}"}
    resp = await cloud.client.delete(
        "/api/v1/agents/00000000-0000-4000-8000-000000000000", headers=headers
    )
    assert resp.status == 404
    resp = await cloud.client.delete("/api/v1/agents/not-a-uuid", headers=headers)
    assert resp.status == 422


async def test_a_bad_or_unknown_owner_is_a_422(cloud: Cloud, world: World) -> None:
    headers = {"Authorization": f"Bearer {await cloud.login('admin@example.com')}"}
    for owner in ("x", "00000000-0000-4000-8000-000000000000"):
        resp = await cloud.client.post(
            "/api/v1/agents", json={"name": "Site", "owner_id": owner}, headers=headers
        )
        assert resp.status == 422, await resp.text()
    resp = await cloud.client.post("/api/v1/agents", json={"name": "Si\u0000te"}, headers=headers)
    assert resp.status == 422, await resp.text()
