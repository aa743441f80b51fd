"""Pairing an agent that is already running, and revoking it in the cloud."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from agent.sync.pairing import pair
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually


async def _admin_and_code(cloud: LiveCloud) -> tuple[str, str, str]:
    """An admin token, an owner's e-mail and a fresh pairing code for that owner."""
    await cloud.add_user("admin", "root@cloud.test")
    owner_id = await cloud.add_user("farm_manager", "owner@cloud.test")
    admin = await cloud.login("root@cloud.test")
    return admin, "owner@cloud.test", await cloud.create_agent_code(admin, owner_id)


async def _farms_in_cloud(cloud: LiveCloud, name: str) -> int:
    return int((await cloud.sql("SELECT count(*) FROM farms WHERE name = $1", name))[0][0])


async def test_a_running_agent_starts_syncing_once_paired_without_a_restart(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    agent: Agent = await make_agent(**FAST_SYNC)
    resp = await agent.client.post(
        "/api/v1/farms/", json={"name": "Before pairing"}, headers=agent.auth()
    )
    assert resp.status == 201
    health = await (await agent.client.get("/healthz")).json()
    assert health["checks"]["cloud"] == "not_paired"

    _, owner_email, code = await _admin_and_code(cloud)
    await pair(cloud.url, code, tmp_path / "state")  # what `farm-agent pair` does

    async def arrived() -> bool:
        return await _farms_in_cloud(cloud, "Before pairing") == 1

    await eventually(arrived, "the farm made before pairing reaches the cloud")
    # The cloud's tokens are trusted from now on, without a restart: once the session has come
    # down with the identity delta of a later sync, the agent accepts it.
    owner_token = await cloud.login(owner_email)

    async def accepted() -> bool:
        resp = await agent.client.get(
            "/api/v1/users/profile", headers={"Authorization": f"Bearer {owner_token}"}
        )
        return resp.status == 200 and (await resp.json())["email"] == owner_email

    await eventually(accepted, "the agent accepts the cloud's token")


async def test_a_revoked_agent_is_refused_and_says_so(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    admin, _, code = await _admin_and_code(cloud)
    link = await pair(cloud.url, code, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    await agent.client.post("/api/v1/farms/", json={"name": "Synced"}, headers=agent.auth())

    async def synced() -> bool:
        return await _farms_in_cloud(cloud, "Synced") == 1

    await eventually(synced, "the first farm reaches the cloud")
    async with (
        aiohttp.ClientSession() as session,
        session.delete(
            f"{cloud.url}/api/v1/agents/{link.agent_id}",
            headers={"Authorization": f"Bearer {admin}"},
        ) as resp,
    ):
        assert resp.status == 204
    await agent.client.post(
        "/api/v1/farms/", json={"name": "After revocation"}, headers=agent.auth()
    )

    async def refused() -> bool:
        health = await (await agent.client.get("/healthz")).json()
        checks = health["checks"]
        return bool(checks["cloud"] == "stuck" and "401" in checks["sync_last_error"])

    await eventually(refused, "the agent reports the cloud refusing it")
    assert await _farms_in_cloud(cloud, "After revocation") == 0
