"""Two agents on one broker: each has its own client id (from its state's instance-id), so
both stay connected and their devices never go offline; the demo keeps its devices on a
private broker unless one is named."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from agent.ops.instance_id import instance_id, mqtt_client_id
from tests.conftest import agent_settings
from tests.support.agent_process import AgentProcess
from tests.support.mosquitto import Mosquitto


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    mosquitto = Mosquitto(tmp_path / "broker")
    await mosquitto.start()
    yield mosquitto
    await mosquitto.stop()


async def _metric(agent: AgentProcess, name: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(agent.url + "/metrics") as resp:
        text = await resp.text()
    found = re.search(rf"^farm_agent_{name}(?:_total)? (\S+)$", text, re.MULTILINE)
    assert found is not None, text
    return int(float(found.group(1)))


async def _received_more(agent: AgentProcess, count: int) -> None:
    """Wait until ``agent`` has received ``count`` more MQTT messages."""
    begun = await _metric(agent, "mqtt_messages_received")
    async with asyncio.timeout(60):
        while await _metric(agent, "mqtt_messages_received") < begun + count:  # noqa: ASYNC110
            await asyncio.sleep(0.2)


async def _offline_events(agent: AgentProcess) -> list[object]:
    answer = await agent.get("/api/v1/events?limit=200")
    return [e for e in answer["events"] if e["kind"] == "device_offline"]


async def test_two_demos_on_one_named_broker_both_stay_connected(
    tmp_path: Path, broker: Mosquitto
) -> None:
    named = {"FARM_MQTT_HOST": "127.0.0.1", "FARM_MQTT_PORT": str(broker.port)}
    demo = ("--sample-data", "--simulate")
    first = AgentProcess(tmp_path / "first", named, args=demo)
    second = AgentProcess(tmp_path / "second", named, args=demo)
    await first.start()
    try:
        await second.start()
        try:
            # Every simulated sensor publishes every 5 s: once each agent has taken two more
            # rounds, a client id taken over by the other (the broker closes the older
            # connection at once) would have shown as a reconnect.
            for agent in (first, second):
                await _received_more(agent, 6)
            for agent in (first, second):
                assert await _metric(agent, "mqtt_connects") == 1
                assert await _metric(agent, "mqtt_connected") == 1
                assert await _offline_events(agent) == []
        finally:
            second.stop()
    finally:
        first.stop()
    log = broker.log.read_text(errors="replace")
    assert "already connected" not in log, log


def test_the_client_id_is_the_states_own_and_stable(tmp_path: Path) -> None:
    one, other = agent_settings(tmp_path / "one"), agent_settings(tmp_path / "other")
    assert mqtt_client_id(one) != mqtt_client_id(other)
    assert mqtt_client_id(one) == mqtt_client_id(one)  # across restarts: the file is kept
    assert mqtt_client_id(one) == f"farm-agent-{instance_id(tmp_path / 'one')[:12]}"
    chosen = agent_settings(tmp_path / "one", mqtt_client_id="line-3")
    assert mqtt_client_id(chosen) == "line-3"


async def test_the_demo_puts_its_devices_on_a_private_broker(tmp_path: Path) -> None:
    """Not on whatever answers on 127.0.0.1:1883 (another demo's broker), unless named."""
    demo = AgentProcess(tmp_path / "demo", {}, args=("--sample-data", "--simulate"))
    await demo.start()
    try:
        log = demo.log.read_text()
        assert "simulated devices on a private broker" in log
        assert "MQTT connected to 127.0.0.1:1883 " not in log
    finally:
        demo.stop()
