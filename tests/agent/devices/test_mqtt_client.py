"""The supervised MQTT client against a real Mosquitto: reconnects, sessions, slow handlers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
from collections.abc import AsyncIterator

import pytest

from agent.devices.codec import OutgoingMessage
from agent.devices.errors import DeviceUnavailable
from agent.devices.mqtt import InboundMessage, MqttClient, outgoing
from tests.agent.devices.conftest import WAIT, eventually, settings_for
from tests.support.mosquitto import Mosquitto


class Inbox:
    """A handler that records what it receives."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.messages.append(message)

    def payloads(self, topic: str) -> list[str]:
        return [m.payload.decode() for m in self.messages if m.topic == topic]


async def _publish_all(client: MqttClient, topic: str, payloads: list[str], qos: int = 1) -> None:
    for payload in payloads:
        await client.publish(OutgoingMessage(topic, payload, qos, False))


async def test_subscriptions_added_and_removed_at_runtime(broker: Mosquitto) -> None:
    inbox = Inbox()
    async with (
        MqttClient(settings_for(broker), inbox) as agent,
        MqttClient(settings_for(broker), Inbox()) as device,
    ):
        await agent.wait_connected(WAIT)
        await device.wait_connected(WAIT)
        await agent.subscribe(["farm/a", "farm/b/#"])
        await _publish_all(device, "farm/a", ["1"])
        await _publish_all(device, "farm/b/x", ["2"])
        await eventually(lambda: len(inbox.messages) == 2)
        await agent.unsubscribe(["farm/a"])
        await _publish_all(device, "farm/a", ["3"])
        await _publish_all(device, "farm/b/y", ["4"])
        await eventually(lambda: inbox.payloads("farm/b/y") == ["4"])
        assert inbox.payloads("farm/a") == ["1"]


async def test_publish_without_a_broker_raises_device_unavailable(broker: Mosquitto) -> None:
    await broker.stop()
    client = MqttClient(settings_for(broker), Inbox())
    async with client:
        with pytest.raises(DeviceUnavailable):
            await client.wait_connected(0.2)
        with pytest.raises(DeviceUnavailable):
            await client.publish(outgoing("command", "cmnd/x/POWER", "ON"))


async def test_client_connects_once_the_broker_comes_up(broker: Mosquitto) -> None:
    await broker.stop()
    inbox = Inbox()
    async with MqttClient(settings_for(broker), inbox) as agent:
        await agent.subscribe(["late/#"])
        await broker.start()
        await agent.wait_connected(WAIT)
        async with MqttClient(settings_for(broker), Inbox()) as device:
            await device.wait_connected(WAIT)
            await _publish_all(device, "late/1", ["hello"])
            await eventually(lambda: inbox.payloads("late/1") == ["hello"])


async def test_resubscribes_and_keeps_receiving_after_broker_is_killed(
    broker: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = Inbox()
    async with (
        MqttClient(settings_for(broker), inbox) as agent,
        MqttClient(settings_for(broker), Inbox()) as device,
    ):
        await agent.wait_connected(WAIT)
        await agent.subscribe(["stream/#"])
        await device.wait_connected(WAIT)
        await _publish_all(device, "stream/t", ["before"])
        await eventually(lambda: inbox.payloads("stream/t") == ["before"])
        # SIGKILL: the broker loses every session and subscription (nothing was saved).
        await broker.restart(kill=True)
        await agent.wait_connected(WAIT)
        await device.wait_connected(WAIT)
        await eventually(lambda: agent.stats.connects == 2)
        sent = [f"after-{i}" for i in range(20)]
        await _publish_all(device, "stream/t", sent)
        await eventually(lambda: inbox.payloads("stream/t") == ["before", *sent])
    # A lost broker is a warning: the client reconnects by itself.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_qos1_messages_for_a_persistent_session_survive_a_broker_restart(
    broker: Mosquitto,
) -> None:
    gate = asyncio.Event()
    held = asyncio.Event()

    async def gated_sleep(_: float) -> None:
        # Holds the agent's reconnect until the test has published into its session.
        held.set()
        await gate.wait()

    inbox = Inbox()
    agent = MqttClient(
        settings_for(broker, client_id="agent-persistent", persistent_session=True),
        inbox,
        sleep=gated_sleep,
    )
    async with agent:
        await agent.wait_connected(WAIT)
        await agent.subscribe(["sensors/#"])
        async with MqttClient(settings_for(broker), Inbox()) as device:
            await device.wait_connected(WAIT)
            await _publish_all(device, "sensors/ph", ["live"])
            await eventually(lambda: inbox.payloads("sensors/ph") == ["live"])
        # A clean broker restart saves the agent's session and subscription to disk.
        await broker.stop()
        await held.wait()
        await broker.start()
        async with MqttClient(settings_for(broker), Inbox()) as device:
            await device.wait_connected(WAIT)
            queued = [f"queued-{i}" for i in range(50)]
            await _publish_all(device, "sensors/ph", queued, qos=1)
        assert not agent.connected
        gate.set()
        await agent.wait_connected(WAIT)
        await eventually(lambda: inbox.payloads("sensors/ph") == ["live", *queued])


async def test_qos1_messages_wait_for_an_agent_that_restarts(broker: Mosquitto) -> None:
    settings = settings_for(broker, client_id="agent-restarting", persistent_session=True)
    first = Inbox()
    async with MqttClient(settings, first) as agent:
        await agent.wait_connected(WAIT)
        await agent.subscribe(["cmd-results/#"])
    async with MqttClient(settings_for(broker), Inbox()) as device:
        await device.wait_connected(WAIT)
        await _publish_all(device, "cmd-results/fan", ["a", "b", "c"], qos=1)
    second = Inbox()
    async with MqttClient(settings, second) as agent:
        await agent.wait_connected(WAIT)
        await eventually(lambda: second.payloads("cmd-results/fan") == ["a", "b", "c"])


async def test_a_slow_handler_gets_every_qos1_message_and_only_qos0_is_dropped(
    broker: Mosquitto,
) -> None:
    release = asyncio.Event()
    busy = asyncio.Event()
    handled: list[str] = []

    async def slow(message: InboundMessage) -> None:
        busy.set()
        await release.wait()
        handled.append(message.payload.decode())

    agent = MqttClient(settings_for(broker, queue_size=10), slow)
    async with agent, MqttClient(settings_for(broker), Inbox()) as device:
        await agent.wait_connected(WAIT)
        await agent.subscribe(["burst"])
        await device.wait_connected(WAIT)
        await _publish_all(device, "burst", ["0"])
        await busy.wait()
        await _publish_all(device, "burst", [f"q1-{i}" for i in range(1, 30)])
        await _publish_all(device, "burst", [f"q0-{i}" for i in range(30)], qos=0)
        # Everything arrives while the handler is stuck on the first message.
        await eventually(lambda: agent.stats.received == 60)
        # QoS 1 is never dropped (the broker's in-flight window bounds it); QoS 0 beyond the
        # queue is.
        assert agent.stats.dropped == 30
        release.set()
        await eventually(lambda: len(handled) == 30)
        assert handled == ["0", *[f"q1-{i}" for i in range(1, 30)]]
        await eventually(lambda: agent.stats.acknowledged == 30)


async def test_a_state_report_overtakes_waiting_telemetry_and_acks_keep_their_order(
    broker: Mosquitto,
) -> None:
    release = asyncio.Event()
    busy = asyncio.Event()
    handled: list[str] = []

    async def slow(message: InboundMessage) -> None:
        busy.set()
        await release.wait()
        handled.append(message.payload.decode())

    settings = settings_for(broker, client_id="agent-lanes", persistent_session=True)
    agent = MqttClient(settings, slow)
    # What confirms a command must not queue behind a backlog of readings.
    agent.prioritize = lambda topic: topic.startswith("stat/")
    async with MqttClient(settings_for(broker), Inbox()) as device:
        await device.wait_connected(WAIT)
        async with agent:
            await agent.wait_connected(WAIT)
            await agent.subscribe(["tele/#", "stat/#"])
            await _publish_all(device, "tele/node", ["t0"])
            await busy.wait()
            await _publish_all(device, "tele/node", [f"t{i}" for i in range(1, 21)])
            await _publish_all(device, "stat/fan", ["ON", "OFF"])
            await eventually(lambda: agent.stats.received == 23)
            release.set()
            await eventually(lambda: len(handled) == 23)
            await eventually(lambda: agent.stats.acknowledged == 23)
        # The state reports came first (in their own order), the telemetry kept its order.
        assert handled == ["t0", "ON", "OFF", *[f"t{i}" for i in range(1, 21)]]
        # Every message was acknowledged: the session has nothing to deliver again.
        await _publish_all(device, "tele/node", ["after"])
        again = Inbox()
        async with MqttClient(settings, again) as agent:
            await agent.wait_connected(WAIT)
            await eventually(lambda: again.payloads("tele/node") == ["after"])
        assert again.payloads("stat/fan") == []


async def test_the_connection_sends_small_packets_at_once(broker: Mosquitto) -> None:
    """Nagle's algorithm held a command's PUBLISH, or the device's answer, behind the previous
    packet's delayed ACK: about 40 ms a command on Linux. Client and broker both turn it off."""
    assert "set_tcp_nodelay true" in broker.config.read_text().splitlines()
    async with MqttClient(settings_for(broker), Inbox()) as agent:
        await agent.wait_connected(WAIT)
        assert agent._client is not None
        sock = agent._client._client.socket()
        assert isinstance(sock, socket.socket)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


class Gate:
    """A commit barrier whose commits the test decides: nothing is committed until ``open()``."""

    def __init__(self) -> None:
        self._open = asyncio.Event()

    def mark(self) -> int:
        return 0

    async def room(self) -> None:
        return None

    def full(self) -> bool:
        return False

    def outcome(self, start: int, end: int) -> bool | None:
        return True if self._open.is_set() else None

    async def progress(self) -> None:
        await self._open.wait()

    def closes_at(self) -> float | None:
        return None

    def open(self) -> None:
        self._open.set()


async def test_a_qos1_message_is_acknowledged_only_once_its_readings_are_committed(
    broker: Mosquitto,
) -> None:
    settings = settings_for(broker, client_id="agent-acking", persistent_session=True)
    gate = Gate()
    first = Inbox()
    async with MqttClient(settings_for(broker), Inbox()) as device:
        await device.wait_connected(WAIT)
        async with MqttClient(settings, first, barrier=gate) as agent:
            await agent.wait_connected(WAIT)
            await agent.subscribe(["readings/#"])
            await _publish_all(device, "readings/ph", ["6.1", "6.2"])
            await eventually(lambda: agent.stats.handled == 2)
            assert agent.stats.acknowledged == 0
        # Handled but never committed: the broker delivers both again to the session.
        second = Inbox()
        gate = Gate()
        async with MqttClient(settings, second, barrier=gate) as agent:
            await agent.wait_connected(WAIT)
            await eventually(lambda: second.payloads("readings/ph") == ["6.1", "6.2"])
            gate.open()
            await eventually(lambda: agent.stats.acknowledged == 2)
        # Committed and acknowledged: nothing comes back.
        await _publish_all(device, "readings/ph", ["6.3"])
        third = Inbox()
        async with MqttClient(settings, third) as agent:
            await agent.wait_connected(WAIT)
            await eventually(lambda: third.payloads("readings/ph") == ["6.3"])


class Committing:
    """A commit barrier that commits every message at once; each message takes the next two
    positions."""

    def __init__(self) -> None:
        self._position = 0

    def mark(self) -> int:
        self._position += 1
        return self._position

    async def room(self) -> None:
        return None

    def full(self) -> bool:
        return False

    def outcome(self, start: int, end: int) -> bool | None:
        return True

    async def progress(self) -> None:
        await asyncio.Event().wait()  # outcome() is never None: nothing to wait for

    def closes_at(self) -> float | None:
        return None


class LosesFirst(Committing):
    """A commit barrier whose first message's readings are lost (as a batch the database
    refused); every later one is committed."""

    def outcome(self, start: int, end: int) -> bool | None:
        return start != 1


async def test_a_message_whose_readings_were_lost_is_delivered_again_on_a_live_connection(
    broker: Mosquitto,
) -> None:
    # The broker re-delivers an unacknowledged message only on a new connection; left alone,
    # each such message held a place in its in-flight window for good, and once the window was
    # full the agent received nothing more (readings stopped until a restart).
    settings = settings_for(broker, client_id="agent-losing", persistent_session=True)
    inbox = Inbox()
    async with MqttClient(settings_for(broker), Inbox()) as device:
        await device.wait_connected(WAIT)
        async with MqttClient(settings, inbox, barrier=LosesFirst()) as agent:
            await agent.wait_connected(WAIT)
            await agent.subscribe(["readings/#"])
            await _publish_all(device, "readings/ph", ["6.1", "6.2"])
            await eventually(lambda: inbox.payloads("readings/ph").count("6.1") == 2)
            await eventually(lambda: agent.stats.acknowledged == 2)
            assert agent.stats.unacknowledged == 1
            await _publish_all(device, "readings/ph", ["6.3"])
            await eventually(lambda: "6.3" in inbox.payloads("readings/ph"))


async def test_failing_or_hanging_handler_does_not_stop_dispatch(broker: Mosquitto) -> None:
    seen: list[str] = []

    async def flaky(message: InboundMessage) -> None:
        text = message.payload.decode()
        if text == "boom":
            raise RuntimeError("handler bug")
        if text == "hang":
            await asyncio.Event().wait()
        seen.append(text)

    agent = MqttClient(settings_for(broker, handler_timeout=0.2), flaky)
    async with agent, MqttClient(settings_for(broker), Inbox()) as device:
        await agent.wait_connected(WAIT)
        await agent.subscribe(["x"])
        await device.wait_connected(WAIT)
        await _publish_all(device, "x", ["ok-1", "boom", "hang", "ok-2"])
        await eventually(lambda: seen == ["ok-1", "ok-2"])
        assert (agent.stats.handler_errors, agent.stats.handler_timeouts) == (1, 1)


async def test_birth_on_connect_and_offline_on_clean_stop(broker: Mosquitto) -> None:
    status = "farm/agent-1/status"
    watcher = Inbox()
    settings = settings_for(
        broker,
        birth=outgoing("status", status, "online"),
        will=outgoing("status", status, "offline"),
    )
    async with MqttClient(settings_for(broker), watcher) as observer:
        await observer.wait_connected(WAIT)
        await observer.subscribe([status])
        async with MqttClient(settings, Inbox()) as agent:
            await agent.wait_connected(WAIT)
            await eventually(lambda: watcher.payloads(status) == ["online"])
        await eventually(lambda: watcher.payloads(status) == ["online", "offline"])


def test_commands_are_qos1_and_never_retained_status_is_retained() -> None:
    command = outgoing("command", "cmnd/fan/FanSpeed", "2")
    assert (command.qos, command.retain) == (1, False)
    status = outgoing("status", "farm/agent/status", "online")
    assert (status.qos, status.retain) == (1, True)


async def test_a_stop_after_the_broker_dropped_the_connection_logs_no_error(
    broker: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop while the session is busy on connect (the demo's Ctrl-C as its devices came up),
    after the broker has dropped the connection: nothing is left for asyncio to report."""
    await _stop_while_busy_on_connect(broker)
    gc.collect()  # asyncio reports an exception never retrieved when its future is collected
    await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text, caplog.text


async def _stop_while_busy_on_connect(broker: Mosquitto) -> None:
    busy = asyncio.Event()

    async def on_connect() -> None:
        busy.set()
        await asyncio.Event().wait()  # still setting up when the stop comes

    client = MqttClient(settings_for(broker), Inbox(), on_connect=on_connect)
    async with client:
        await asyncio.wait_for(busy.wait(), WAIT)
        await broker.stop()
        await eventually(lambda: _dropped(client))


def _dropped(client: MqttClient) -> bool:
    """Whether aiomqtt has seen the connection end (its private future; paho_internals.settle)."""
    session = client._receiving
    return session is not None and session._disconnected.done()


class Batch(Committing):
    """A commit barrier gathering one batch that closes at ``closes`` (loop time)."""

    def __init__(self, closes: float | None) -> None:
        super().__init__()
        self.closes = closes

    def closes_at(self) -> float | None:
        return self.closes


class Timed(Inbox):
    """An inbox that notes the loop time each message was handled at."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.times.append(asyncio.get_running_loop().time())
        await super().__call__(message)


@contextlib.asynccontextmanager
async def _in_step(
    broker: Mosquitto, inbox: Inbox, batch: Batch, topics: str
) -> AsyncIterator[tuple[MqttClient, MqttClient]]:
    """A device, and an agent reading in step with ``batch``'s commits, subscribed to
    ``topics``; both connected."""
    async with (
        MqttClient(settings_for(broker), Inbox()) as device,
        MqttClient(settings_for(broker), inbox, barrier=batch, in_step_with_commits=True) as agent,
    ):
        await agent.wait_connected(WAIT)
        await agent.subscribe([topics])
        await device.wait_connected(WAIT)
        yield device, agent


async def test_a_trickle_is_read_shortly_before_the_batch_it_joins_closes(
    broker: Mosquitto,
) -> None:
    """Telemetry read in step with the commits: what comes while a batch gathers waits in the
    socket until shortly before it closes, then is read at once, and every message is still
    handled and acknowledged."""
    loop = asyncio.get_running_loop()
    batch = Batch(None)
    inbox = Timed()
    async with _in_step(broker, inbox, batch, "trickle/#") as (device, agent):
        # No batch open: read as it comes.
        await _publish_all(device, "trickle/a", ["0"])
        await eventually(lambda: inbox.payloads("trickle/a") == ["0"])
        batch.closes = loop.time() + 1.5
        await _publish_all(device, "trickle/a", ["1"])
        await eventually(lambda: inbox.payloads("trickle/a") == ["0", "1"])
        # The read of "1" found a batch gathering: the next ones wait for its close.
        sent = [str(i) for i in range(2, 7)]
        await _publish_all(device, "trickle/a", sent)
        await eventually(lambda: inbox.payloads("trickle/a") == ["0", "1", *sent])
        assert min(inbox.times[2:]) >= batch.closes - 0.1 - 0.01  # not before (a lower bound)
        await eventually(lambda: agent.stats.acknowledged == 7)


async def test_a_connection_lost_while_reads_wait_for_the_commit_comes_back(
    broker: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    batch = Batch(None)
    inbox = Inbox()
    async with _in_step(broker, inbox, batch, "paused/#") as (device, agent):
        batch.closes = loop.time() + 1.0
        await _publish_all(device, "paused/a", ["before"])
        await eventually(lambda: inbox.payloads("paused/a") == ["before"])
        # The socket is left unread until the batch closes; the broker dies meanwhile.
        await broker.restart(kill=True)
        await eventually(lambda: agent.stats.connects == 2)
        await agent.wait_connected(WAIT)
        await device.wait_connected(WAIT)
        batch.closes = None
        await _publish_all(device, "paused/a", ["after"])
        await eventually(lambda: inbox.payloads("paused/a") == ["before", "after"])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
