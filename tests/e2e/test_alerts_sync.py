"""An agent's alerts, raised and cleared by its rules, read the same from the cloud: the cloud's
GET /api/v1/alerts and /sensors answer from the mirrored events and devices in the agent's
shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.agent.alerts.test_alert_evaluator import make_probe
from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state


async def cloud_get(cloud: LiveCloud, token: str, path: str, **params: str) -> Any:
    """GET from the cloud; ``None`` while the farm is not mirrored yet (a 404)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{cloud.url}{path}", params=params, headers={"Authorization": f"Bearer {token}"}
        ) as got,
    ):
        if got.status == 404:
            return None
        assert got.status == 200, await got.text()
        return await got.json()


async def test_the_clouds_alerts_and_sensors_are_the_agents(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    probe = await make_probe(agent)
    token = await cloud.login(owner_email)

    async def same_alerts(state: str) -> bool:
        ours = await probe.alerts(state)
        theirs = await cloud_get(cloud, token, "/api/v1/alerts", farm_id=probe.farm_id)
        return (
            bool(ours)
            and theirs is not None
            and [a for a in theirs["alerts"] if a["state"] == state] == ours
        )

    probe.feed((0, 31.5))
    await eventually(lambda: same_alerts("active"), "the raised alert in the cloud")
    probe.feed((1, 27.0))
    await eventually(lambda: same_alerts("cleared"), "the cleared alert in the cloud")
    active = await cloud_get(cloud, token, "/api/v1/alerts", farm_id=probe.farm_id, state="active")
    assert (active["alerts"], active["total"]) == ([], 0)

    resp = await agent.client.get(
        "/api/v1/sensors", params={"farm_id": probe.farm_id}, headers=agent.auth()
    )
    (ours,) = (await resp.json())["sensors"]
    (theirs,) = (await cloud_get(cloud, token, "/api/v1/sensors", farm_id=probe.farm_id))["sensors"]
    registry = ("id", "name", "device_type", "farm_id", "location", "profile")
    assert {k: theirs[k] for k in registry} == {k: ours[k] for k in registry}
