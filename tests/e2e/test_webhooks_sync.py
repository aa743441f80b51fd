"""One alert raised on the farm reaches both webhooks: the agent's (posted on the LAN as the
alert is recorded) and the cloud's (posted once the sync batch carrying the event commits), each
signed with its own secret and carrying the same event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.agent.alerts.test_alert_evaluator import make_probe
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state
from tests.support.webhook_receiver import WebhookReceiver


@pytest.fixture
def cloud_overrides() -> dict[str, Any]:
    """The receivers listen on 127.0.0.1: the operator lets the cloud reach them."""
    return {"webhook_allow_private_targets": True, "webhook_poll_s": 0.05}


async def test_an_alert_reaches_the_agents_and_the_clouds_webhooks(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC, webhook_poll_s=0.05)
    probe = await make_probe(agent)
    token = await cloud.login(owner_email)
    on_lan, on_internet = WebhookReceiver(), WebhookReceiver()
    await on_lan.start()
    await on_internet.start()
    try:
        body = {"farm_id": probe.farm_id, "event_types": ["alert.raised"]}
        resp = await agent.client.post(
            "/api/v1/webhooks", json=body | {"url": on_lan.url}, headers=agent.auth()
        )
        assert resp.status == 201, await resp.text()
        on_lan.secret = (await resp.json())["secret"]

        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:

            async def mirrored() -> bool:
                async with session.get(f"{cloud.url}/api/v1/farms/{probe.farm_id}") as got:
                    return got.status == 200

            await eventually(mirrored, "the farm in the cloud")
            async with session.post(
                f"{cloud.url}/api/v1/webhooks", json=body | {"url": on_internet.url}
            ) as created:
                assert created.status == 201, await created.text()
                on_internet.secret = (await created.json())["secret"]
        assert on_lan.secret != on_internet.secret

        probe.feed((0, 31.5))
        await on_lan.wait_for(1)
        await on_internet.wait_for(1, timeout=30)
        (lan,), (internet,) = on_lan.received, on_internet.received
        assert on_lan.rejected == on_internet.rejected == 0
        assert lan.body["type"] == internet.body["type"] == "alert.raised"
        assert lan.body["data"]["event_id"] == internet.body["data"]["event_id"]
        assert lan.body["data"]["details"]["raised_value"] == 31.5
        assert internet.body["data"]["details"]["raised_value"] == 31.5
        assert lan.id != internet.id  # one message per webhook
    finally:
        await on_lan.stop()
        await on_internet.stop()
