"""The MQTT devices the agent listens to and commands, behind one object.

``MqttDeviceGateway`` routes each incoming message to the devices bound to its topic, decodes it
with their profiles, tracks availability, hands the results to a sink (the services layer stores
and broadcasts them), and confirms commands by waiting for the device's own state report.
Malformed payloads, unknown topics, out-of-range values and NaN are counted and logged at a
limited rate; they never raise out of ``handle``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Literal, Protocol

from agent.devices.availability import AvailabilityChange, AvailabilityTracker
from agent.devices.codec import Command, DeviceCodec, Measurement, OutgoingMessage, StateUpdate
from agent.devices.errors import PayloadError
from agent.devices.mqtt import InboundMessage
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog

__all__ = ["CommandResult", "DeviceEventSink", "IngestStats", "MqttDeviceGateway", "MqttTransport"]

log = logging.getLogger(__name__)

Outcome = Literal["confirmed", "timed_out", "rejected", "unconfirmed"]


class MqttTransport(Protocol):
    """What the gateway needs from the MQTT client."""

    async def subscribe(self, filters: Iterable[str]) -> None: ...
    async def unsubscribe(self, filters: Iterable[str]) -> None: ...
    async def publish(self, message: OutgoingMessage, timeout: float | None = None) -> None: ...  # noqa: ASYNC109


class DeviceEventSink(Protocol):
    """Receives what devices report (implemented by the services layer)."""

    async def measurements(
        self, device_id: str, measurements: Sequence[Measurement], received_at: datetime
    ) -> None: ...
    async def states(
        self, device_id: str, states: Sequence[StateUpdate], received_at: datetime
    ) -> None: ...
    async def availability(self, change: AvailabilityChange) -> None: ...


@dataclass(frozen=True)
class CommandResult:
    """How a command ended; ``observed`` is the state reported while waiting.

    ``unconfirmed`` means the firmware reports none of the affected state, so it was only sent.
    """

    outcome: Outcome
    expected: Mapping[str, bool | int]
    observed: Mapping[str, bool | int]
    detail: str = ""


@dataclass
class IngestStats:
    """Exact counters; the log is rate-limited, these are not."""

    messages: int = 0
    measurements: int = 0
    states: int = 0
    unknown_topic: int = 0
    malformed: int = 0
    retained_skipped: int = 0
    sink_errors: int = 0
    rejected: dict[str, int] = field(default_factory=dict)


@dataclass
class _Waiter:
    expected: Mapping[str, bool | int]
    future: asyncio.Future[CommandResult]
    observed: dict[str, bool | int] = field(default_factory=dict)


@dataclass
class _Device:
    codec: DeviceCodec
    device_tz: tzinfo | None
    waiters: list[_Waiter] = field(default_factory=list)
    state_topics: frozenset[str] = frozenset()


class MqttDeviceGateway:
    """Routes, decodes and confirms for every bound MQTT device."""

    def __init__(
        self,
        transport: MqttTransport,
        sink: DeviceEventSink,
        *,
        availability: AvailabilityTracker | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        device_tz: tzinfo | None = None,
        log_interval: float = 60.0,
    ) -> None:
        self._transport = transport
        self._sink = sink
        self._clock = clock
        self._now = now
        self._device_tz = device_tz
        self.availability = availability or AvailabilityTracker(clock)
        self.stats = IngestStats()
        self._devices: dict[str, _Device] = {}
        self._routes: dict[str, list[str]] = {}
        # Per topic, how many bound devices report their state on it: asked for every message.
        self._state_topics: dict[str, int] = {}
        self._problems = ThrottledLog(log, log_interval, clock)
        self._expiry_task: asyncio.Task[None] | None = None

    async def add(
        self, device_id: str, codec: DeviceCodec, device_tz: tzinfo | None = None
    ) -> None:
        """Bind a device (replacing an earlier binding) and subscribe to its topics."""
        if device_id in self._devices:
            await self.remove(device_id)
        state_topics = codec.state_topics()
        self._devices[device_id] = _Device(
            codec, device_tz or self._device_tz, state_topics=state_topics
        )
        for topic in state_topics:
            self._state_topics[topic] = self._state_topics.get(topic, 0) + 1
        new_topics = []
        for topic in codec.subscriptions():
            routes = self._routes.setdefault(topic, [])
            if not routes:
                new_topics.append(topic)
            routes.append(device_id)
        availability = codec.profile.availability
        self.availability.track(device_id, availability.silence_timeout_s if availability else None)
        await self._transport.subscribe(new_topics)

    async def remove(self, device_id: str) -> None:
        """Unbind a device; pending commands for it time out."""
        device = self._devices.pop(device_id, None)
        if device is None:
            return
        self.availability.forget(device_id)
        for topic in device.state_topics:
            left = self._state_topics.pop(topic) - 1
            if left:
                self._state_topics[topic] = left
        unused = []
        for topic in device.codec.subscriptions():
            routes = self._routes.get(topic, [])
            if device_id in routes:
                routes.remove(device_id)
            if not routes:
                self._routes.pop(topic, None)
                unused.append(topic)
        await self._transport.unsubscribe(unused)

    def is_online(self, device_id: str) -> bool | None:
        """The device's availability (None while unknown)."""
        return self.availability.is_online(device_id)

    def reports_state(self, topic: str) -> bool:
        """Whether a bound device reports its state on ``topic`` (its messages confirm
        commands, so the MQTT client handles them before waiting telemetry)."""
        return topic in self._state_topics

    async def handle(self, message: InboundMessage) -> None:
        """Process one incoming message; never raises for bad input."""
        self.stats.messages += 1
        device_ids = self._routes.get(message.topic)
        if not device_ids:
            self.stats.unknown_topic += 1
            # One key for all topics: a storm of random topics must not become a log storm.
            self._problems.warning(
                "unknown-topic", "MQTT message on unknown topic %s", message.topic
            )
            return
        received_at = self._now()
        for device_id in tuple(device_ids):
            await self._handle_for(device_id, message, received_at)

    async def _handle_for(
        self, device_id: str, message: InboundMessage, received_at: datetime
    ) -> None:
        device = self._devices.get(device_id)
        if device is None:
            return
        try:
            decoded = device.codec.decode(message.topic, message.payload, device.device_tz)
        except PayloadError as err:
            self.stats.malformed += 1
            self._problems.warning(
                f"malformed:{device_id}",
                "device %s: bad payload on %s: %s",
                device_id,
                message.topic,
                err,
            )
            return
        for rejection in decoded.rejected:
            self.stats.rejected[rejection.reason] = self.stats.rejected.get(rejection.reason, 0) + 1
            self._problems.warning(
                f"{rejection.reason}:{device_id}:{rejection.name}",
                "device %s: %s %s (%s) on %s",
                device_id,
                rejection.name,
                rejection.reason.replace("_", " "),
                rejection.value,
                message.topic,
            )
        if decoded.online is not None:
            await self._availability(self.availability.observe_status(device_id, decoded.online))
        elif not message.retain:
            # A retained replay is old news: it says nothing about the device being up now.
            await self._availability(self.availability.observe_message(device_id))
        if decoded.command_error is not None:
            self._reject_waiters(device, decoded.command_error)
        if decoded.states:
            self.stats.states += len(decoded.states)
            self._observe_states(device, decoded.states)
            await self._deliver(
                device_id, self._sink.states(device_id, decoded.states, received_at)
            )
        if decoded.measurements:
            if message.retain:
                # Retained readings (ESPHome retains by default) have no time: skip, not guess.
                self.stats.retained_skipped += len(decoded.measurements)
                return
            self.stats.measurements += len(decoded.measurements)
            await self._deliver(
                device_id, self._sink.measurements(device_id, decoded.measurements, received_at)
            )

    async def _deliver(self, device_id: str, delivery: Awaitable[None]) -> None:
        try:
            await delivery
        except Exception:
            self.stats.sink_errors += 1
            self._problems.exception("sink", "device %s: storing a report failed", device_id)

    async def _availability(self, change: AvailabilityChange | None) -> None:
        if change is None:
            return
        log.info(
            "device %s is %s (%s)",
            change.device_id,
            "online" if change.online else "offline",
            change.reason,
        )
        try:
            await self._sink.availability(change)
        except Exception:
            self.stats.sink_errors += 1
            self._problems.exception(
                "sink", "device %s: availability update failed", change.device_id
            )

    def _observe_states(self, device: _Device, states: Sequence[StateUpdate]) -> None:
        for waiter in device.waiters:
            if waiter.future.done():
                continue
            waiter.observed.update({state.field: state.value for state in states})
            if all(waiter.observed.get(key) == value for key, value in waiter.expected.items()):
                waiter.future.set_result(
                    CommandResult("confirmed", waiter.expected, dict(waiter.observed))
                )

    def _reject_waiters(self, device: _Device, error: str) -> None:
        for waiter in device.waiters:
            if not waiter.future.done():
                waiter.future.set_result(
                    CommandResult("rejected", waiter.expected, dict(waiter.observed), error)
                )

    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult:  # noqa: ASYNC109
        """Publish a command and wait up to ``timeout`` s for the state report confirming it.

        Raises KeyError for an unknown device, ValueError if its firmware has no such command,
        DeviceUnavailable if the broker is not reachable.
        """
        device = self._devices[device_id]
        messages = device.codec.encode(command)
        expected = device.codec.expected_state(command)
        waiter = _Waiter(expected, asyncio.get_running_loop().create_future())
        # Registered before publishing, so a device that answers at once is not missed.
        device.waiters.append(waiter)
        try:
            for message in messages:
                await self._transport.publish(message)
            if not expected:
                return CommandResult("unconfirmed", expected, {}, "firmware reports no state")
            try:
                async with asyncio.timeout(timeout):
                    return await waiter.future
            except TimeoutError:
                return CommandResult("timed_out", expected, dict(waiter.observed))
        finally:
            device.waiters.remove(waiter)

    async def expire(self) -> list[AvailabilityChange]:
        """Apply silence timeouts now and report the changes to the sink."""
        changes = self.availability.expire()
        for change in changes:
            await self._availability(change)
        return changes

    async def start(self, interval: float = 5.0) -> None:
        """Start checking silence timeouts every ``interval`` seconds."""
        if self._expiry_task is None:
            self._expiry_task = asyncio.create_task(self._expire_loop(interval), name="expiry")

    async def stop(self) -> None:
        """Stop the silence-timeout task."""
        task, self._expiry_task = self._expiry_task, None
        await cancel_and_wait(task)

    async def _expire_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire()
            except Exception:
                log.exception("availability expiry failed")
