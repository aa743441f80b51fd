"""A live agent with MQTT on a private Mosquitto, and simulated Tasmota/ESPHome actuators."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.web.keys import DEVICE_RUNTIME
from tests.agent.devices_api.conftest import create_farm, register
from tests.agent.runtime.conftest import PROFILES, broker, eventually, runtime_settings
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto

__all__ = ["Rig", "broker", "start_live"]

# A device that does not answer must time out quickly; a confirmation on loopback takes ms.
COMMAND_TIMEOUT_S = 1.5


async def start_live(
    make_agent: Callable[..., Awaitable[Agent]], mosquitto: Mosquitto, **overrides: Any
) -> Agent:
    """Start an agent connected to ``mosquitto`` and wait for the connection."""
    settings = {
        **runtime_settings(mosquitto),
        "serial_enabled": False,
        "actuator_command_timeout_s": COMMAND_TIMEOUT_S,
        **overrides,
    }
    agent = await make_agent(**settings)
    client = agent.client.app[DEVICE_RUNTIME].client
    assert client is not None
    await client.wait_connected(10)
    return agent


@dataclass
class Rig:
    """A live agent, a farm on it and the broker its devices use."""

    agent: Agent
    farm_id: str
    broker: Mosquitto

    async def actuator(self, kind: str, profile: str, base: str, **extra: Any) -> str:
        """Register an MQTT actuator and return its id."""
        body = {
            "name": f"{kind} {base}",
            "kind": kind,
            "farm_id": self.farm_id,
            "profile": profile,
            "address": {"transport": "mqtt", "topic_base": base},
            **extra,
        }
        return str((await register(self.agent, body))["id"])

    def simulator(self, profile: str, base: str) -> SimulatedMqttDevice:
        """A simulated device that answers commands like its firmware."""
        return SimulatedMqttDevice(
            PROFILES[profile], base, port=self.broker.port, autopublish=False, rng=random.Random(7)
        )

    async def get(self, path: str, **params: Any) -> Any:
        """GET as the admin, asserting 200."""
        resp = await self.agent.client.get(path, params=params, headers=self.agent.auth())
        body = await resp.json()
        assert resp.status == 200, body
        return body

    async def fan(self, fan_id: str) -> dict[str, Any]:
        """The fan as GET /fans/ lists it."""
        fans = (await self.get("/api/v1/fans/", limit=500))["fans"]
        found: dict[str, Any] = next(fan for fan in fans if fan["id"] == fan_id)
        return found

    async def online(self, device_id: str) -> None:
        """Wait until the agent has heard the device."""

        async def check() -> bool:
            body = await self.get(f"/api/v1/devices/{device_id}")
            return bool(body["status"] == "online")

        await eventually(check)


@pytest.fixture
async def rig(make_agent: Callable[..., Awaitable[Agent]], broker: Mosquitto) -> Rig:
    """A live agent with a farm."""
    agent = await start_live(make_agent, broker)
    return Rig(agent, await create_farm(agent), broker)
