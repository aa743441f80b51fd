"""State reports and commands on their own connection: a command is confirmed while the broker
holds back the telemetry connection's messages (readings not yet committed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from agent.devices.codec import Command, DeviceCodec, OutgoingMessage
from agent.devices.gateway import MqttDeviceGateway
from agent.devices.mqtt import InboundMessage, MqttClient
from agent.devices.mqtt_split import SplitTransport
from agent.devices.profiles import ProfileRegistry
from tests.agent.devices.conftest import WAIT, RecordingSink, eventually, settings_for
from tests.agent.devices.test_mqtt_client import Gate
from tests.support.mosquitto import Mosquitto

# The test broker's max_inflight_messages (agent/devices/broker_process.py), and more.
_WINDOW = 1000
_SENT = _WINDOW + 100


async def _ignore(message: InboundMessage) -> None:
    return None


@dataclass
class Split:
    telemetry: MqttClient
    control: MqttClient
    gateway: MqttDeviceGateway
    sink: RecordingSink


@asynccontextmanager
async def _split(broker: Mosquitto, client_id: str, gate: Gate) -> AsyncIterator[Split]:
    sink = RecordingSink()
    gateway: MqttDeviceGateway

    async def handle(message: InboundMessage) -> None:
        await gateway.handle(message)

    settings = settings_for(broker, client_id=client_id, persistent_session=True)
    telemetry = MqttClient(settings, handle, barrier=gate)
    control = MqttClient(settings_for(broker, client_id=f"{client_id}-control"), handle)
    transport = SplitTransport(telemetry, control, lambda topic: gateway.reports_state(topic))
    gateway = MqttDeviceGateway(transport, sink)
    async with control, telemetry:
        await telemetry.wait_connected(WAIT)
        await control.wait_connected(WAIT)
        yield Split(telemetry, control, gateway, sink)


async def test_a_command_is_confirmed_while_telemetry_waits_for_its_commit(
    broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    gate = Gate()  # readings never commit: the broker's in-flight window fills
    async with _split(broker, "agent-split", gate) as agent:
        await agent.gateway.add("node", DeviceCodec(profiles["generic-json"], "node"))
        await agent.gateway.add("fan", DeviceCodec(profiles["esphome-fan"], "fan"))
        async with MqttClient(settings_for(broker), _ignore) as sensor:  # and the fan
            await sensor.wait_connected(WAIT)
            for n in range(_SENT):
                payload = f'{{"ts": {1772359200 + n}, "sensors": {{"co2_ppm": 800}}}}'
                await sensor.publish(OutgoingMessage("farm/node/telemetry", payload, 1, False))
            await eventually(lambda: agent.telemetry.stats.handled >= _WINDOW)
            # The fan answers at QoS 1 (as a firmware configured for it does): on the one
            # connection the broker would queue its report behind the unacknowledged window.
            for on in (True, False, True):
                sending = asyncio.create_task(
                    agent.gateway.send("fan", Command("power", on), timeout=WAIT)
                )
                await asyncio.sleep(0)  # the command's waiter is registered
                state = OutgoingMessage("fan/fan/fan/state", "ON" if on else "OFF", 1, False)
                await sensor.publish(state)
                assert (await sending).outcome == "confirmed"
        # Telemetry is still held back: nothing past the window reached the agent.
        assert len(agent.sink.values("node", "co2")) < _SENT
        gate.open()


async def test_a_state_topic_held_by_an_older_session_arrives_once(
    broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    topic = "fan/fan/fan/state"
    # An agent from before the split subscribed the state topic on its persistent session.
    settings = settings_for(broker, client_id="agent-upgraded", persistent_session=True)
    async with MqttClient(settings, _ignore) as old:
        await old.wait_connected(WAIT)
        await old.subscribe([topic])
    gate = Gate()
    async with _split(broker, "agent-upgraded", gate) as agent:
        await agent.gateway.add("fan", DeviceCodec(profiles["esphome-fan"], "fan"))
        assert topic in agent.control.filters and topic not in agent.telemetry.filters
        async with MqttClient(settings_for(broker), _ignore) as fan:
            await fan.wait_connected(WAIT)
            await fan.publish(OutgoingMessage(topic, "ON", 1, False))
            await eventually(lambda: len(agent.sink.reported) == 1)
            await fan.publish(OutgoingMessage("fan/fan/fan/speed_level/state", "40", 1, False))
            await eventually(lambda: len(agent.sink.reported) == 2)
        await asyncio.sleep(0.2)  # a second copy of the first report would be here by now
        assert [s.field for _, s in agent.sink.reported] == ["power", "fan_speed"]
        gate.open()
