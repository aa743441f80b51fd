"""A real agent with MQTT and serial on, a private Mosquitto, and helpers to feed it readings."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from agent.devices.profiles import load_profiles
from agent.settings import DEFAULT_PROFILES_DIR
from agent.web.keys import DATABASE, DEVICE_RUNTIME
from tests.agent.devices_api.conftest import create_farm, register
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto

PROFILES = load_profiles(DEFAULT_PROFILES_DIR)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    """A private broker on a free port."""
    mosquitto = Mosquitto(tmp_path / "broker")
    await mosquitto.start()
    yield mosquitto
    await mosquitto.stop()


def runtime_settings(broker: Mosquitto) -> dict[str, Any]:
    """Agent settings with the device transports on, polling and committing quickly."""
    return {
        "mqtt_enabled": True,
        "serial_enabled": True,
        "mqtt_port": broker.port,
        "mqtt_client_id": f"agent-{uuid.uuid4().hex[:8]}",
        "serial_poll_interval_s": 0.2,
        "reading_batch_interval_s": 0.05,
        "reading_unwatched_batch_interval_s": 0.05,
    }


@pytest.fixture
async def live(make_agent: Callable[..., Awaitable[Agent]], broker: Mosquitto) -> Agent:
    """A running agent connected to the private broker."""
    agent = await make_agent(**runtime_settings(broker))
    client = agent.client.app[DEVICE_RUNTIME].client
    assert client is not None
    await client.wait_connected(10)
    return agent


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``within`` seconds."""
    last: Any = None
    try:
        async with asyncio.timeout(within):
            # Polls state another process or the database holds; there is no event to wait on.
            while not (last := await check()):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"condition not met within {within} s (last: {last!r})")
    return last


@dataclass
class Farm:
    """A farm on the live agent."""

    agent: Agent
    farm_id: str

    async def register_mqtt(self, profile: str, base: str, kind: str = "sensor") -> str:
        """Register an MQTT device and return its id."""
        body = {
            "name": f"{profile} {base}",
            "kind": kind,
            "farm_id": self.farm_id,
            "profile": profile,
            "address": {"transport": "mqtt", "topic_base": base},
        }
        device: dict[str, Any] = await register(self.agent, body)
        return str(device["id"])

    async def device(self, device_id: str) -> dict[str, Any]:
        """GET /devices/{id}."""
        resp = await self.agent.client.get(
            f"/api/v1/devices/{device_id}", headers=self.agent.auth()
        )
        assert resp.status == 200, await resp.text()
        body: dict[str, Any] = await resp.json()
        return body

    async def data(self, device_id: str, metric: str) -> list[dict[str, Any]]:
        """The metric's points from GET /sensors/{id}/data over the last two days."""
        end = datetime.now(UTC) + timedelta(minutes=1)
        params = {
            "metric": metric,
            "start": (end - timedelta(days=2)).isoformat(),
            "end": end.isoformat(),
            "max_points": "10000",
        }
        resp = await self.agent.client.get(
            f"/api/v1/sensors/{device_id}/data", params=params, headers=self.agent.auth()
        )
        body = await resp.json()
        assert resp.status == 200, body
        for series in body["series"]:
            if series.get("metric") == metric:
                points: list[dict[str, Any]] = series["points"]
                return points
        return []

    async def stored(self, device_id: str, metric: str) -> set[int]:
        """Timestamps (ms) of the raw readings stored for a series."""
        rows = await self.agent.client.app[DATABASE].fetch_all(
            "SELECT r.ts FROM readings_all r JOIN series s ON s.id = r.series_id"
            " WHERE s.device_id = ? AND s.metric = ?",
            (device_id, metric),
        )
        return {int(row["ts"]) for row in rows}


@pytest.fixture
async def farm(live: Agent) -> Farm:
    """A farm on the live agent."""
    return Farm(live, await create_farm(live))


def tasmota_payload(index: int, base: datetime) -> str:
    """Tasmota SHT3x telemetry with an offset in Time (SetOption52 1): distinct per index."""
    moment = base + timedelta(seconds=index)
    return json.dumps(
        {
            "Time": moment.isoformat(timespec="seconds"),
            "SHT3X": {"Temperature": round(20 + (index % 100) / 10, 1), "Humidity": 50.0},
            "TempUnit": "C",
        }
    )


async def publish_acknowledged(
    host: str, port: int, topic: str, payloads: list[str], client_id: str
) -> int:
    """Publish at QoS 1 until the broker acknowledged each payload (reconnecting as needed)."""
    sent = 0
    while sent < len(payloads):
        try:
            async with aiomqtt.Client(host, port, identifier=client_id, timeout=5) as client:
                while sent < len(payloads):
                    await client.publish(topic, payloads[sent], qos=1, timeout=5)
                    sent += 1
        except aiomqtt.MqttError:
            await asyncio.sleep(0.1)
    return sent
