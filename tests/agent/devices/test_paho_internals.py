"""paho-mqtt's private internals the MQTT client uses: present in the installed release, read
in it, and doing on a real Mosquitto what the agent relies on."""

from __future__ import annotations

import asyncio
import collections
import inspect
import socket

import aiomqtt
import paho.mqtt
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from agent.devices import paho_internals
from agent.devices.codec import OutgoingMessage
from agent.devices.errors import DeviceUnavailable
from agent.devices.mqtt import MqttClient
from tests.agent.devices.conftest import WAIT, settings_for
from tests.support.mosquitto import Mosquitto

# paho's private methods the module calls or replaces, with their parameters.
_PAHO_METHODS = {
    "_handle_on_message": ["self", "message"],
    "_packet_read": ["self"],
    "_packet_handle": ["self"],
    "_loop_rc_handle": ["self", "rc"],
    "_packet_queue": ["self", "command", "packet", "mid", "qos", "info"],
    "_packet_write": ["self"],
    "manual_ack_set": ["self", "on"],
    "socket": ["self"],
    "disconnect": ["self", "reasoncode", "properties"],
}


def test_the_installed_paho_is_a_release_whose_internals_were_checked() -> None:
    assert paho.mqtt.__version__ in paho_internals.CHECKED_PAHO_VERSIONS, (
        f"paho-mqtt {paho.mqtt.__version__}: read agent/devices/paho_internals.py's internals in"
        " it, then add it to CHECKED_PAHO_VERSIONS (and to pyproject.toml's pin)"
    )


def test_paho_s_private_methods_are_there_with_the_parameters_used() -> None:
    for name, parameters in _PAHO_METHODS.items():
        method = getattr(mqtt.Client, name, None)
        assert callable(method), f"paho's Client.{name} is gone"
        assert list(inspect.signature(method).parameters) == parameters, name
    queue = inspect.signature(mqtt.Client._packet_queue).parameters
    assert queue["info"].default is None
    client = mqtt.Client(CallbackAPIVersion.VERSION2)
    assert isinstance(client._out_packet, collections.deque)
    assert set(client._in_packet) == {
        "command",
        "have_remaining",
        "remaining_count",
        "remaining_mult",
        "remaining_length",
        "packet",
        "to_process",
        "pos",
    }
    assert hasattr(client, "_last_bytes_received") or hasattr(client, "_last_msg_in")
    assert hasattr(client, "_last_msg_out") and hasattr(client, "_sock")
    with client._msgtime_mutex:
        assert callable(mqtt.time_func)
    assert client._protocol == MQTTProtocolVersion.MQTTv311
    assert inspect.signature(mqtt.MQTTMessageInfo).parameters.keys() == {"mid"}


async def test_aiomqtt_s_private_attributes_used_are_there() -> None:
    client = aiomqtt.Client("127.0.0.1", 1883)
    assert isinstance(client._client, mqtt.Client)
    assert isinstance(client._connected, asyncio.Future)
    assert isinstance(client._disconnected, asyncio.Future)
    assert isinstance(client._pending_subscribes, dict)
    assert isinstance(client._pending_unsubscribes, dict)


@pytest.mark.parametrize(
    "protocol", [MQTTProtocolVersion.MQTTv311, MQTTProtocolVersion.MQTTv5], ids=["3.1.1", "5"]
)
async def test_joined_publishes_arrive_in_order_with_their_retain_flags(
    broker: Mosquitto, protocol: MQTTProtocolVersion
) -> None:
    messages = [
        OutgoingMessage(f"relay/{n % 3}", "é" * n, qos=0, retain=n % 2 == 0) for n in range(200)
    ]
    messages.append(OutgoingMessage("relay/big", "x" * 20_000, qos=0, retain=True))
    async with (
        aiomqtt.Client(broker.host, broker.port, identifier="hub", protocol=protocol) as hub,
        aiomqtt.Client(broker.host, broker.port, identifier="agent", protocol=protocol) as agent,
    ):
        await hub.subscribe("relay/#", qos=1)
        paho_internals.send_publishes(agent, messages)
        got = []
        async with asyncio.timeout(WAIT):
            async for message in hub.messages:
                got.append((str(message.topic), message.payload, message.retain))
                if len(got) == len(messages):
                    break
    assert got == [(m.topic, m.payload.encode(), False) for m in messages]
    # What a hub connecting later sees: the retained ones, the newest of each topic.
    async with aiomqtt.Client(broker.host, broker.port, identifier="late") as late:
        await late.subscribe("relay/#", qos=1)
        retained: dict[str, bytes] = {}
        async with asyncio.timeout(WAIT):
            async for message in late.messages:
                retained[str(message.topic)] = message.payload  # type: ignore[assignment]
                if len(retained) == 4:
                    break
    assert retained == {
        "relay/0": ("é" * 198).encode(),
        "relay/1": ("é" * 196).encode(),
        "relay/2": ("é" * 194).encode(),
        "relay/big": b"x" * 20_000,
    }


async def test_joined_writes_leave_at_once_and_what_the_socket_refuses_follows_in_order(
    broker: Mosquitto,
) -> None:
    async with (
        aiomqtt.Client(broker.host, broker.port, identifier="hub") as hub,
        aiomqtt.Client(broker.host, broker.port, identifier="agent") as agent,
    ):
        await hub.subscribe("relay/#", qos=1)
        paho_internals.send_publishes(agent, [OutgoingMessage("relay/0", "first", 0, True)])
        # Sent in the call: nothing waits for a turn of the event loop in paho's queue.
        assert not agent._client._out_packet
        sock = agent._client.socket()
        assert isinstance(sock, socket.socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        big = [OutgoingMessage(f"relay/{n}", str(n) * 4000, 0, False) for n in range(1, 200)]
        paho_internals.send_publishes(agent, big[:100])
        paho_internals.send_publishes(agent, big[100:])
        got = []
        async with asyncio.timeout(WAIT):
            async for message in hub.messages:
                got.append((str(message.topic), message.payload))
                if len(got) == 200:
                    break
    assert got == [("relay/0", b"first")] + [(m.topic, m.payload.encode()) for m in big]


@pytest.mark.parametrize(
    "protocol", [MQTTProtocolVersion.MQTTv311, MQTTProtocolVersion.MQTTv5], ids=["3.1.1", "5"]
)
async def test_the_reader_takes_whole_publishes_across_reads_and_leaves_the_rest_to_paho(
    broker: Mosquitto, protocol: MQTTProtocolVersion
) -> None:
    got: list[tuple[str, bytes, int, bool, int]] = []
    by_paho: list[tuple[str, bytes, int, bool, int]] = []
    # Larger than one read of the socket, and many small ones in one.
    sent = [(f"in/{n % 4}", f"{n}:".encode() + b"y" * (n % 7), n % 2) for n in range(300)]
    sent.insert(150, ("in/big", b"z" * 70_000, 1))
    async with (
        aiomqtt.Client(broker.host, broker.port, identifier="reader", protocol=protocol) as agent,
        aiomqtt.Client(broker.host, broker.port, identifier="device", protocol=protocol) as device,
    ):
        await device.publish("in/kept", b"retained", qos=1, retain=True)
        # paho's own reader would hand them here.
        paho_internals.receive_with(agent, lambda *message: by_paho.append(message))
        paho_internals.read_in_bursts(agent, lambda *message: got.append(message))
        # The SUBACK goes to paho through the reader: the subscribe returns.
        await agent.subscribe("in/#", qos=1)
        for topic, payload, qos in sent:
            await device.publish(topic, payload, qos=qos)
        async with asyncio.timeout(WAIT):
            while len(got) < len(sent) + 1:  # noqa: ASYNC110 (appended by the reader)
                await asyncio.sleep(0.01)
        paho_internals.send_pubacks(agent, [mid for *_, qos, _, mid in got if qos])
    assert not by_paho
    assert got[0][:4] == ("in/kept", b"retained", 1, True)
    assert [(topic, payload, qos) for topic, payload, qos, _, _ in got[1:]] == sent
    assert not any(retain for *_, retain, _ in got[1:])
    assert all(mid > 0 for _, _, qos, _, mid in got if qos)


async def test_a_joined_publish_refuses_what_is_not_qos_0_and_publishes_nothing(
    broker: Mosquitto,
) -> None:
    received: list[str] = []
    async with (
        aiomqtt.Client(broker.host, broker.port, identifier="hub") as hub,
        MqttClient(settings_for(broker), lambda m: asyncio.sleep(0)) as agent,
    ):
        await hub.subscribe("relay/#", qos=1)
        await agent.wait_connected(WAIT)
        for bad in (
            OutgoingMessage("relay/b", "1", qos=1, retain=False),
            OutgoingMessage("relay/+", "1", qos=0, retain=False),
        ):
            with pytest.raises(ValueError):
                agent.publish_now([OutgoingMessage("relay/a", "0", qos=0, retain=False), bad])
        agent.publish_now([OutgoingMessage("relay/last", "1", qos=0, retain=False)])
        async with asyncio.timeout(WAIT):
            async for message in hub.messages:
                received.append(str(message.topic))
                if message.topic.value == "relay/last":
                    break
    assert received == ["relay/last"]


async def test_a_joined_publish_without_a_connection_is_device_unavailable(
    broker: Mosquitto,
) -> None:
    client = MqttClient(settings_for(broker), lambda m: asyncio.sleep(0))
    with pytest.raises(DeviceUnavailable):
        client.publish_now([OutgoingMessage("relay/a", "0", qos=0, retain=False)])
