"""A real agent whose climate loop runs on a clock the test moves, plus helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.app import create_app
from agent.devices.simulator.room import SimulatedRoom
from agent.services.climate.runtime import ClimateRuntime
from agent.web.keys import CLIMATE_RUNTIME, CLOCK_WATCH
from tests.agent.runtime.conftest import eventually
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Agent, agent_settings
from tests.support.clock import Clock


@pytest.fixture
def clock() -> Clock:
    """The agent's clock."""
    return Clock()


ClimateAgentFactory = Callable[..., Awaitable[Agent]]


@pytest.fixture
def make_climate_agent(aiohttp_client: Any, tmp_path: Path, clock: Clock) -> ClimateAgentFactory:
    """Start an agent on ``clock`` whose loop steps only when a test calls ``step``."""

    async def start(**overrides: Any) -> Agent:
        # An hour between automatic steps: every step in these tests is the test's own.
        settings = agent_settings(tmp_path / "state", **{"climate_interval_s": 3600.0, **overrides})
        client = await aiohttp_client(create_app(settings, clock=clock))
        # The test moves the wall clock by hand, far faster than the monotonic clock: the clock
        # watch would take every move for a jump and tell the loop to discount it.
        await client.app[CLOCK_WATCH].stop()
        resp = await client.post(
            "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert resp.status == 200, await resp.text()
        return Agent(client, (await resp.json())["access_token"])

    return start


def loop_of(agent: Agent) -> ClimateRuntime:
    """The agent's climate runtime."""
    runtime: ClimateRuntime = agent.client.app[CLIMATE_RUNTIME]
    return runtime


async def heard(agent: Agent, farm_id: str, room: SimulatedRoom) -> None:
    """Wait until the loop holds what the room's sensor last reported (to the sensor's own
    precision, a tenth for ESPHome), received at the loop's present time. Counting readings was
    not enough: the sensor's announcement on connect could still be on its way and pass for the
    tick's report."""
    loop = loop_of(agent)

    async def holds() -> bool:
        samples = await loop.sensor_samples(farm_id, None)
        now = loop.now()
        return all(
            any(abs(s.value - value) < 0.06 and s.at == now for s in samples.get(metric, ()))
            for metric, value in room.reported.items()
        )

    await eventually(holds)


def settings_body(farm_id: str, fan_ids: list[str], **overrides: Any) -> dict[str, Any]:
    """A valid POST /climate-control/update body."""
    body: dict[str, Any] = {
        "farm_id": farm_id,
        "temperature": {"target": 24.0, "band": 1.0},
        "humidity": {"target": 65.0, "band": 5.0},
        "mode": "auto",
        "fan_ids": fan_ids,
        "min_on_s": 60,
        "min_off_s": 60,
        "failsafe_speed": 40,
        "stale_after_s": 120,
        "manual_hold_s": 300,
    }
    body.update(overrides)
    return body


async def update(agent: Agent, body: dict[str, Any], token: str | None = None) -> Any:
    """POST /climate-control/update."""
    return await agent.client.post(
        "/api/v1/climate-control/update", json=body, headers=agent.auth(token)
    )


async def history(agent: Agent, farm_id: str, **params: str) -> list[dict[str, Any]]:
    """GET /climate-control/history entries, newest first."""
    resp = await agent.client.get(
        "/api/v1/climate-control/history",
        params={"farm_id": farm_id, "limit": "500", **params},
        headers=agent.auth(),
    )
    body = await resp.json()
    assert resp.status == 200, body
    entries: list[dict[str, Any]] = body["entries"]
    return entries
