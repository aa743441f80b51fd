"""Home Assistant MQTT discovery: what a hub on the farm's broker sees, and its commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiomqtt
import pytest

from agent.web.keys import DEVICE_RUNTIME
from tests.agent.control.conftest import Rig, start_live
from tests.agent.devices_api.conftest import create_farm
from tests.agent.runtime.conftest import eventually
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto


class Hub:
    """A Home Assistant stand-in on the broker: keeps the last payload of every topic it sees."""

    def __init__(self, client: aiomqtt.Client) -> None:
        self.client = client
        self.seen: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    async def run(self) -> None:
        async for message in self.client.messages:
            topic = message.topic.value
            payload = message.payload
            self.seen[topic] = payload.decode() if isinstance(payload, bytes) else str(payload)
            self.counts[topic] = self.counts.get(topic, 0) + 1

    def configs(self, device_id: str) -> dict[str, dict[str, Any]]:
        """The non-empty discovery configs of a device's entities, by topic."""
        return {
            topic: json.loads(payload)
            for topic, payload in self.seen.items()
            if topic.endswith("/config") and f"farm_{device_id}_" in topic and payload
        }

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        await self.client.publish(topic, payload, qos=1, retain=retain)


@contextlib.asynccontextmanager
async def hub_on(broker: Mosquitto, *filters: str) -> AsyncIterator[Hub]:
    async with aiomqtt.Client("127.0.0.1", broker.port, identifier="home-assistant") as client:
        for topic in filters:
            await client.subscribe(topic, qos=1)
        hub = Hub(client)
        task = asyncio.create_task(hub.run())
        try:
            yield hub
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_hub_sees_valid_configs_for_sensors_and_actuators(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "ifan")
    sensor_body = {
        "name": "Climate north",
        "kind": "sensor",
        "farm_id": rig.farm_id,
        "profile": "tasmota-sht3x",
        "address": {"transport": "mqtt", "topic_base": "sht"},
    }
    resp = await rig.agent.client.post(
        "/api/v1/devices", json=sensor_body, headers=rig.agent.auth()
    )
    assert resp.status == 201, await resp.text()
    sensor_id = (await resp.json())["id"]
    async with hub_on(rig.broker, "homeassistant/#") as hub:
        fan = await eventually(lambda: _async(hub.configs(fan_id)))
        sensors = await eventually(
            lambda: _async(len(hub.configs(sensor_id)) >= 2 and hub.configs(sensor_id))
        )

    ((fan_topic, fan_config),) = fan.items()
    assert fan_topic == f"homeassistant/fan/farm_{fan_id}_fan/config"
    assert fan_config["unique_id"] == f"farm_{fan_id}_fan"
    assert fan_config["device"]["identifiers"] == [f"farm_{fan_id}"]
    assert fan_config["device"]["name"] == "fan ifan"
    assert fan_config["origin"]["name"] == "farm-agent"
    assert fan_config["percentage_command_topic"] == f"farm-agent/{fan_id}/fan_speed/set"
    assert fan_config["percentage_state_topic"] == f"farm-agent/{fan_id}/fan_speed"
    # Available when the agent and the device's own LWT both say so.
    assert fan_config["availability_mode"] == "all"
    assert {
        "topic": "tele/ifan/LWT",
        "payload_available": "Online",
        "payload_not_available": "Offline",
    } in fan_config["availability"]
    assert {
        "topic": "farm-agent/status",
        "payload_available": "online",
        "payload_not_available": "offline",
    } in fan_config["availability"]

    by_metric = {config["state_topic"].rsplit("/", 1)[1]: config for config in sensors.values()}
    temperature, humidity = by_metric["temperature"], by_metric["humidity"]
    assert (temperature["device_class"], temperature["unit_of_measurement"]) == (
        "temperature",
        "°C",
    )
    assert (humidity["device_class"], humidity["unit_of_measurement"]) == ("humidity", "%")
    assert temperature["state_class"] == "measurement"
    assert temperature["device"]["identifiers"] == humidity["device"]["identifiers"]
    assert len({config["unique_id"] for config in sensors.values()}) == len(sensors)


async def test_a_command_on_the_advertised_topic_moves_a_fan_and_is_confirmed(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "ifan")
    async with (
        rig.simulator("tasmota-ifan", "ifan") as sim,
        hub_on(rig.broker, "homeassistant/#", f"farm-agent/{fan_id}/#", "farm-agent/status") as hub,
    ):
        await sim.wait_ready(10)
        await rig.online(fan_id)
        config = (await eventually(lambda: _async(hub.configs(fan_id)))).popitem()[1]
        # The availability topic's "online" comes from the telemetry connection, the discovery
        # configs from the control connection: either may reach the hub first.
        await eventually(lambda: _async(hub.seen.get("farm-agent/status") == "online"))

        await hub.publish(config["percentage_command_topic"], "67")

        async def confirmed() -> Any:
            history = await rig.get(f"/api/v1/devices/{fan_id}/commands")
            return history["commands"] and history["commands"][0]

        command = await eventually(confirmed)
        assert (command["kind"], command["value"], command["outcome"]) == (
            "fan_speed",
            67,
            "confirmed",
        )
        assert sim.state["fan_speed"] == 67
        # The fan's state comes back to the hub on the advertised state topic.
        await eventually(lambda: _async(hub.seen.get(config["percentage_state_topic"]) == "67"))

        # Off through the entity's on/off topic: speed 0, confirmed too.
        await hub.publish(config["command_topic"], "OFF")
        await eventually(lambda: _async(sim.state["fan_speed"] == 0))


async def test_a_burst_of_readings_reaches_the_hub_as_the_newest_value_not_one_by_one(
    rig: Rig,
) -> None:
    body = {
        "name": "CO2 node",
        "kind": "sensor",
        "farm_id": rig.farm_id,
        "profile": "generic-json",
        "address": {"transport": "mqtt", "topic_base": "co2node"},
    }
    resp = await rig.agent.client.post("/api/v1/devices", json=body, headers=rig.agent.auth())
    assert resp.status == 201, await resp.text()
    sensor_id = (await resp.json())["id"]
    state_topic = f"farm-agent/{sensor_id}/co2"
    start = int(time.time()) - 3600
    async with hub_on(rig.broker, f"farm-agent/{sensor_id}/#") as hub:
        # A device (or a broker handing over a session's backlog) delivers 200 readings at once.
        for n in range(200):
            payload = json.dumps({"ts": start + n, "sensors": {"co2_ppm": 400 + n}})
            await hub.publish("farm/co2node/telemetry", payload)
        await eventually(lambda: _async(hub.seen.get(state_topic) == "599.0"))
    # The retained state topic got the newest value, not 200 updates one after another.
    assert hub.counts[state_topic] < 50


async def test_nonsense_on_a_command_topic_changes_nothing(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "ifan")
    async with hub_on(rig.broker, "homeassistant/#") as hub:
        config = (await eventually(lambda: _async(hub.configs(fan_id)))).popitem()[1]
        for payload in ("fast", "", "1e999", "nan", "101", "-1", "{}"):
            await hub.publish(config["percentage_command_topic"], payload)
        # A valid command after them is carried out (the device is absent: unavailable/timed out),
        # and it is the only one recorded.
        await hub.publish(config["percentage_command_topic"], "34")
        history = await eventually(
            lambda: _json(rig.get(f"/api/v1/devices/{fan_id}/commands"), "commands")
        )
    assert [(c["kind"], c["value"]) for c in history] == [("fan_speed", 34)]


async def test_a_deleted_device_is_removed_and_hub_restarts_get_configs_again(rig: Rig) -> None:
    fan_id = await rig.actuator("fan", "tasmota-ifan", "ifan")
    async with hub_on(rig.broker, "homeassistant/#") as hub:
        topic = next(iter(await eventually(lambda: _async(hub.configs(fan_id)))))
        seen_before = hub.counts[topic]
        # Home Assistant restarted: it says so on its status topic and gets every config again.
        await hub.publish("homeassistant/status", "online")
        await eventually(lambda: _async(hub.counts[topic] > seen_before))

        resp = await rig.agent.client.delete(f"/api/v1/devices/{fan_id}", headers=rig.agent.auth())
        assert resp.status == 204, await resp.text()
        await eventually(lambda: _async(hub.seen[topic] == ""))
    # The removal is retained: a hub connecting later sees no config for the device.
    async with hub_on(rig.broker, "homeassistant/#", "probe/done") as late:
        # Retained messages come on subscribing, before this connection's own later publish.
        await late.publish("probe/done", "x")
        await eventually(lambda: _async("probe/done" in late.seen))
        assert late.configs(fan_id) == {}


async def test_discovery_prefix_and_switch_are_settings(
    make_agent: Callable[..., Awaitable[Agent]], broker: Mosquitto
) -> None:
    agent = await start_live(make_agent, broker, ha_discovery_prefix="ha-test")
    rig = Rig(agent, await create_farm(agent), broker)
    fan_id = await rig.actuator("fan", "tasmota-ifan", "ifan")
    async with hub_on(broker, "ha-test/#") as hub:
        topic = next(iter(await eventually(lambda: _async(hub.configs(fan_id)))))
    assert topic.startswith("ha-test/fan/")


@pytest.mark.parametrize("prefix", ["home#", "a b", ""])
async def test_a_bad_prefix_is_refused_at_start_up(prefix: str) -> None:
    from pydantic import ValidationError

    from agent.settings import AgentSettings

    with pytest.raises(ValidationError, match="ha_discovery_prefix"):
        AgentSettings(ha_discovery_prefix=prefix)


async def test_with_discovery_off_the_agent_listens_to_no_hub(
    make_agent: Callable[..., Awaitable[Agent]], broker: Mosquitto
) -> None:
    agent = await start_live(make_agent, broker, ha_discovery_enabled=False)
    runtime = agent.client.app[DEVICE_RUNTIME]
    assert runtime.client is not None
    assert runtime.client.settings.birth is None
    assert "homeassistant/status" not in runtime.listening


async def _async(value: Any) -> Any:
    return value


async def _json(response: Awaitable[Any], key: str) -> Any:
    return (await response)[key]
