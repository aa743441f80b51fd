"""Home Assistant MQTT discovery published by the agent, and the commands it receives back.

``HaDiscovery`` follows the device registry: a bound device gets its retained discovery configs
(``discovery_configs``), an unbound one (deleted or disabled) gets them replaced by empty retained
payloads, which removes its entities from Home Assistant. The configs are published again after
every connect and whenever Home Assistant announces ``online`` on ``<prefix>/status``. Readings
and reported states are relayed to the entities' state topics; commands on the advertised command
topics go through ``ActuatorService.command`` (confirmed by the device, recorded, an event), in
background tasks bounded in number so the MQTT connection never waits for a device.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agent.devices.codec import Command, OutgoingMessage
from agent.devices.errors import DeviceUnavailable
from agent.devices.mqtt import InboundMessage, MessageHandler
from agent.devices.profiles import SWITCH_FIELDS, CommandKind
from agent.services.devices.registry import DeviceBinding
from agent.services.readings.listeners import CommittedReading, ReadingSubscription
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog
from integrations.home_assistant.agent_side.discovery_configs import (
    OFF,
    ON,
    DiscoveryTopics,
    command_topics,
    device_configs,
)
from protocol.errors import ApiError
from protocol.identity import Principal
from protocol.live.outbox import Missed, Outbox
from protocol.schemas.actuators import CommandRecord

__all__ = ["Commander", "HaDiscovery", "MqttSide", "Publisher"]

log = logging.getLogger(__name__)

#: Commands from Home Assistant being carried out at once; more are refused (logged).
MAX_COMMANDS_IN_FLIGHT = 32
#: A publish that takes longer is abandoned (the broker is away; the next connect re-publishes).
PUBLISH_TIMEOUT_S = 5.0
#: The shortest time between two relayed readings on one state topic (the newest one wins).
READING_RELAY_INTERVAL_S = 1.0
# Relayed states published (as one write) in one event-loop step at most.
RELAY_PUBLISHES_PER_STEP = 256


class Publisher(Protocol):
    """The agent's MQTT client, as far as publishing goes."""

    async def publish(self, message: OutgoingMessage, timeout: float | None = None) -> None: ...  # noqa: ASYNC109

    def publish_now(self, messages: Sequence[OutgoingMessage]) -> None:
        """QoS 0 messages, in order, in one write, without waiting."""
        ...


class MqttSide(Protocol):
    """The device runtime's connection: listening to exact topics, and connect hooks."""

    async def listen(self, topics: Iterable[str], handler: MessageHandler) -> None: ...
    async def unlisten(self, topics: Iterable[str]) -> None: ...
    def on_connect(self, hook: Callable[[], Awaitable[None]]) -> None: ...


class Commander(Protocol):
    """The agent's command path (``ActuatorService.command``)."""

    async def command(
        self,
        principal: Principal | None,
        device_id: str,
        command: Command,
        *,
        source: Literal["manual", "schedule", "climate"],
    ) -> CommandRecord: ...


DeviceName = Callable[[str], Awaitable[str | None]]


@dataclass
class _Advertised:
    """A bound device's entities: their configs are rendered again for each publish, not kept.

    A farm's configs as JSON were about 1.1 MB resident (500 devices, 1,500 entities: some 650
    bytes each), held only for the re-publish after a connect or Home Assistant's ``online``.
    """

    render: Callable[[], dict[str, dict[str, Any]]]
    """The device's discovery configs by config topic, as :func:`device_configs` builds them."""
    config_topics: tuple[str, ...]
    commands: dict[str, CommandKind]

    def configs(self) -> dict[str, str]:
        """The retained payload of each config topic."""
        return _payloads(self.render())


def _payloads(configs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {topic: json.dumps(config, separators=(",", ":")) for topic, config in configs.items()}


class HaDiscovery:
    """Advertises the farm's devices to Home Assistant and carries out its commands."""

    def __init__(
        self,
        side: MqttSide,
        publisher: Publisher,
        commander: Commander,
        device_name: DeviceName,
        *,
        topics: DiscoveryTopics,
        origin: Mapping[str, str],
    ) -> None:
        self._side = side
        self._publisher = publisher
        self._commander = commander
        self._device_name = device_name
        self.topics = topics
        self._origin = dict(origin)
        self._devices: dict[str, _Advertised] = {}
        self._commands: dict[str, tuple[str, CommandKind]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._relays: list[asyncio.Task[None]] = []
        self._problems = ThrottledLog(log)

    # Lifecycle ---------------------------------------------------------------------------------

    async def start(
        self,
        bindings: Iterable[DeviceBinding],
        relay: Iterable[Outbox],
        readings: ReadingSubscription | None = None,
    ) -> None:
        """Advertise ``bindings``, listen to Home Assistant, relay the reported states that
        ``relay`` carries and the committed ``readings``."""
        for binding in bindings:
            await self.device_bound(binding)
        await self._side.listen([self.topics.hub_status], self._hub_status)
        self._side.on_connect(self._connected)
        self._relays = [
            asyncio.create_task(self._relay(outbox), name="ha-discovery-relay") for outbox in relay
        ]
        if readings is not None:
            self._relays.append(
                asyncio.create_task(self._relay_readings(readings), name="ha-discovery-readings")
            )

    async def stop(self) -> None:
        """Stop relaying and cancel commands still waiting for their device."""
        await cancel_and_wait(*self._relays, *self._tasks)
        self._relays = []

    # RegistryListener ----------------------------------------------------------------------------

    async def device_bound(self, binding: DeviceBinding) -> None:
        """Advertise a registered (or re-enabled) device and listen to its command topics."""
        name = await self._device_name(binding.device_id) or binding.device_id
        availability = binding.profile.availability
        lwt = None
        if binding.topic_base is not None:
            status_topic = binding.mqtt_codec().status_topic
            if status_topic is not None and availability is not None:
                lwt = (status_topic, availability.online, availability.offline)
        render = functools.partial(
            device_configs,
            self.topics,
            device_id=binding.device_id,
            name=name,
            kind=binding.kind,
            profile=binding.profile,
            lwt=lwt,
            origin=self._origin,
        )
        configs = _payloads(render())
        commands = command_topics(self.topics, binding.device_id, binding.kind, binding.profile)
        advertised = _Advertised(render, tuple(configs), commands)
        self._devices[binding.device_id] = advertised
        for topic, kind in commands.items():
            self._commands[topic] = (binding.device_id, kind)
        await self._side.listen(commands, self._command)
        await self._publish_configs(configs)

    async def device_unbound(self, device_id: str) -> None:
        """Remove a deleted (or disabled) device's entities: empty retained configs."""
        advertised = self._devices.pop(device_id, None)
        if advertised is None:
            return
        for topic in advertised.commands:
            self._commands.pop(topic, None)
        await self._side.unlisten(advertised.commands)
        await self._publish_configs(dict.fromkeys(advertised.config_topics, ""))

    # Publishing ----------------------------------------------------------------------------------

    async def publish_all(self) -> None:
        """Publish every advertised device's configs again."""
        for advertised in tuple(self._devices.values()):
            await self._publish_configs(advertised.configs())

    async def _publish_configs(self, configs: Mapping[str, str]) -> None:
        for topic, payload in configs.items():
            await self._publish(OutgoingMessage(topic, payload, qos=1, retain=True))

    async def _publish(self, message: OutgoingMessage) -> None:
        try:
            await self._publisher.publish(message, timeout=PUBLISH_TIMEOUT_S)
        except DeviceUnavailable as err:
            # Published again on the next connect or when Home Assistant comes online.
            self._problems.warning("publish", "Home Assistant discovery not published: %s", err)

    def _spawn(self, work: Awaitable[None], name: str) -> bool:
        if len(self._tasks) >= MAX_COMMANDS_IN_FLIGHT:
            return False

        async def run() -> None:
            await work

        task = asyncio.create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _connected(self) -> None:
        # In the background: the connection's dispatch must not wait for many publishes.
        if not self._spawn(self.publish_all(), "ha-discovery-publish"):
            self._problems.warning("busy", "Home Assistant discovery: too busy to re-publish")

    async def _hub_status(self, message: InboundMessage) -> None:
        if message.payload.strip() == b"online":
            log.info("Home Assistant is online: publishing discovery")
            await self._connected()

    async def _relay(self, outbox: Outbox) -> None:
        """Relay reported states to the entities' state topics as they come."""
        while True:
            await outbox.wait()
            states: dict[str, str] = {}
            while (event := outbox.get_nowait()) is not None:
                if isinstance(event, Missed) or event.device_id not in self._devices:
                    continue
                for field, value in _state_values(event.type, event.data).items():
                    states[self.topics.state(event.device_id, field)] = value
            await self._publish_states(states)

    async def _relay_readings(self, readings: ReadingSubscription) -> None:
        """Relay committed readings to the entities' state topics.

        The state topics are retained, so only the newest value of each counts: at most one
        publish per topic every ``READING_RELAY_INTERVAL_S`` (the newest reading). A burst of
        readings (a broker handing over a session's backlog, a catch-up) then costs Home
        Assistant and the agent one publish per series, not one per reading. The readings come
        straight from the writer: under a flood, a stream event built per reading only to be
        folded here cost more than the relay itself.
        """
        loop = asyncio.get_running_loop()
        latest: dict[str, str] = {}
        flush_at = loop.time()
        devices = self._devices
        state = self.topics.state
        while True:
            reading: CommittedReading | None = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(flush_at if latest else None):
                    reading = await readings.get()
            while reading is not None:
                if reading.device_id in devices:
                    latest[state(reading.device_id, reading.metric)] = str(reading.value)
                reading = readings.get_nowait()
            if latest and loop.time() >= flush_at:
                due, latest = latest, {}
                await self._publish_states(due)
                flush_at = loop.time() + READING_RELAY_INTERVAL_S

    async def _publish_states(self, states: Mapping[str, str]) -> None:
        """Publish retained QoS 0 states, ``RELAY_PUBLISHES_PER_STEP`` to a write.

        Each write is one event-loop step: a farm's thousands of series in one would hold the
        event loop for milliseconds, and a person's request arriving then would wait it out.
        """
        messages = [
            OutgoingMessage(topic, value, qos=0, retain=True) for topic, value in states.items()
        ]
        for start in range(0, len(messages), RELAY_PUBLISHES_PER_STEP):
            if start:
                await asyncio.sleep(0)
            try:
                self._publisher.publish_now(messages[start : start + RELAY_PUBLISHES_PER_STEP])
            except DeviceUnavailable as err:
                # Dropped: the next flush publishes newer values.
                self._problems.warning("publish", "Home Assistant state not published: %s", err)
                return

    # Commands from Home Assistant ----------------------------------------------------------------

    async def _command(self, message: InboundMessage) -> None:
        target = self._commands.get(message.topic)
        if target is None:
            return
        device_id, kind = target
        try:
            command = Command(kind, _command_value(kind, message.payload))
        except ValueError as err:
            self._problems.warning(
                f"bad:{device_id}", "Home Assistant command for %s refused: %s", device_id, err
            )
            return
        if not self._spawn(self._carry_out(device_id, command), f"ha-command-{device_id}"):
            self._problems.warning(
                "busy", "Home Assistant command for %s refused: too many in flight", device_id
            )

    async def _carry_out(self, device_id: str, command: Command) -> None:
        try:
            record = await self._commander.command(None, device_id, command, source="manual")
        except ApiError as err:
            log.warning("Home Assistant command for %s refused: %s", device_id, err)
            return
        except Exception:
            log.exception("Home Assistant command for %s failed", device_id)
            return
        log.info(
            "Home Assistant command %s=%s for %s: %s",
            command.kind,
            command.value,
            device_id,
            record.outcome,
        )


def _command_value(kind: CommandKind, payload: bytes) -> bool | int:
    """A command's value from Home Assistant's payload: ON/OFF, or a percentage."""
    text = payload.decode("utf-8", "replace").strip()
    if text in (ON, OFF):
        on = text == ON
        return on if kind in SWITCH_FIELDS else (100 if on else 0)
    if kind in SWITCH_FIELDS:
        raise ValueError(f"{kind} takes {ON} or {OFF}, not {text[:20]!r}")
    try:
        return int(float(text))
    except (ValueError, OverflowError):
        raise ValueError(f"{kind} takes a percentage, not {text[:20]!r}") from None


def _state_values(event_type: str, data: Mapping[str, Any]) -> dict[str, str]:
    """The state topics' payloads a device event updates: its reported states."""
    if event_type == "status-update" and data.get("event") == "state":
        return {
            str(field): (ON if value else OFF) if isinstance(value, bool) else str(value)
            for field, value in dict(data.get("state", {})).items()
        }
    return {}
