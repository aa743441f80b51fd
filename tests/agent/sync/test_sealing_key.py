"""A paired agent learns the cloud's sealing key from the cloud, trusts it only when the token
key it got at pairing signed it, keeps it in its link, and only then queues its contact points
for the cloud, sealed to that key."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.sync.link import CloudLink
from agent.web.keys import DATABASE
from farmkit.sealing import open_sealed, public_key_text, sealing_private_key, sign_sealing_key
from protocol.jwk import public_jwk
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import add_contact
from tests.conftest import AgentFactory
from tests.e2e.helpers import FAST_SYNC, eventually


@dataclass
class FakeCloud:
    """Answers the sealing key it is given; refuses batches (the cloud is busy)."""

    answer: dict[str, str] = field(default_factory=dict)
    asked: int = 0
    runner: web.AppRunner | None = None
    url: str = ""

    async def start(self) -> None:
        async def sealing_key(_: web.Request) -> web.Response:
            self.asked += 1
            return web.json_response(self.answer)

        async def busy(_: web.Request) -> web.Response:
            return web.json_response({"success": False}, status=503)

        app = web.Application()
        app.router.add_get("/api/v1/agents/sealing-key", sealing_key)
        app.router.add_route("*", "/{tail:.*}", busy)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"


@pytest.fixture
async def fake_cloud() -> AsyncIterator[FakeCloud]:
    cloud = FakeCloud()
    await cloud.start()
    yield cloud
    assert cloud.runner is not None
    await cloud.runner.cleanup()


def _signed(signer: Ed25519PrivateKey, owner: Ed25519PrivateKey) -> dict[str, str]:
    """``owner``'s sealing key, signed by ``signer``."""
    public = sealing_private_key(owner).public_key()
    return {"key": public_key_text(public), "signature": sign_sealing_key(signer, public)}


async def test_the_agent_seals_for_the_cloud_only_with_a_key_its_cloud_signed(
    make_agent: AgentFactory, fake_cloud: FakeCloud, tmp_path: Path
) -> None:
    cloud, impostor = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    state = tmp_path / "state"
    CloudLink(
        cloud_url=fake_cloud.url,
        agent_id="8d3e1d2c-5b7a-4f0e-9a43-1f6c2b9d0e11",
        cloud_issuer="farm-cloud",
        cloud_public_key=public_jwk(cloud.public_key())["x"],
    ).save(state)
    fake_cloud.answer = _signed(impostor, impostor)  # someone between the agent and its cloud
    agent = await make_agent(**FAST_SYNC)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, "ntfy://ntfy.example.org/farm-north-3c9e")

    async def queued() -> list[Any]:
        rows = await agent.client.app[DATABASE].fetch_all(
            "SELECT payload FROM outbox WHERE entity = 'contact_points'"
        )
        return [json.loads(row["payload"]) for row in rows]

    async def asked(times: int) -> bool:
        return fake_cloud.asked >= times

    await eventually(lambda: asked(3), "the agent asking for the sealing key")
    # The impostor's key beside the signature the cloud made over its own.
    fake_cloud.answer = {**_signed(cloud, cloud), "key": _signed(impostor, impostor)["key"]}
    await eventually(lambda: asked(6), "the agent asking again")
    assert CloudLink.load(state).cloud_sealing_key is None  # type: ignore[union-attr]
    assert await queued() == []

    fake_cloud.answer = _signed(cloud, cloud)  # the cloud's own, signed by it

    async def learned() -> bool:
        return bool(await queued())

    await eventually(learned, "the contact point queued once the key is known")
    link = CloudLink.load(state)
    assert link is not None and link.cloud_sealing_key == fake_cloud.answer["key"]
    [data] = await queued()
    assert "url" not in data and data["id"] == contact["id"]
    opened = open_sealed(sealing_private_key(cloud), data["url_sealed"], contact["id"])
    assert opened == "ntfy://ntfy.example.org/farm-north-3c9e"
