"""The relay of readings to Home Assistant shares the event loop with the farm's requests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from agent.devices.codec import OutgoingMessage
from agent.devices.mqtt import MessageHandler
from agent.devices.profiles import load_profiles
from agent.services.devices.registry import DeviceBinding
from agent.services.readings.listeners import CommittedReading, ListenerSet
from agent.settings import DEFAULT_PROFILES_DIR
from integrations.home_assistant.agent_side.discovery import Commander, HaDiscovery
from integrations.home_assistant.agent_side.discovery_configs import DiscoveryTopics

SENSORS = 600


class _Side:
    async def listen(self, topics: Iterable[str], handler: MessageHandler) -> None:
        return None

    async def unlisten(self, topics: Iterable[str]) -> None:
        return None

    def on_connect(self, hook: Callable[[], Awaitable[None]]) -> None:
        return None


class _Publisher:
    """Writes at once, as the MQTT client's QoS 0 publishes do: never suspends."""

    def __init__(self, log: list[str], topics: set[str]) -> None:
        self.log = log
        self.topics = topics
        self.relayed = asyncio.Event()
        self.largest = 0

    async def publish(self, message: OutgoingMessage, timeout: float | None = None) -> None:  # noqa: ASYNC109
        # Discovery configs (QoS 1); readings are relayed without waiting.
        assert message.topic not in self.topics

    def publish_now(self, messages: Sequence[OutgoingMessage]) -> None:
        self.log.append("write")
        self.largest = max(self.largest, len(messages))
        for message in messages:
            assert (message.qos, message.retain) == (0, True)
            self.topics.discard(message.topic)
        if not self.topics:
            self.relayed.set()


async def test_a_flush_of_many_series_lets_the_farm_s_requests_run_between_writes() -> None:
    # A QoS 0 write never suspends: a flush of a farm's series in one event-loop step would
    # hold every request that arrives meanwhile (milliseconds at a few thousand series).
    profile = load_profiles(DEFAULT_PROFILES_DIR)["generic-json"]
    topics = DiscoveryTopics("homeassistant", "farm")
    ids = [f"sensor-{n}" for n in range(SENSORS)]
    log: list[str] = []
    publisher = _Publisher(log, {topics.state(device, "temperature") for device in ids})
    discovery = HaDiscovery(
        cast(Any, _Side()),
        publisher,
        cast(Commander, None),
        lambda device_id: asyncio.sleep(0, result=device_id),
        topics=topics,
        origin={"name": "farm-agent"},
    )
    bindings = [
        DeviceBinding(device, "farm", "sensor", profile, f"farm/{device}", {}, None, {})
        for device in ids
    ]
    listeners = ListenerSet()
    await discovery.start(bindings, [], listeners.subscribe(10 * SENSORS))

    async def other_work() -> None:
        while True:
            log.append("other")
            await asyncio.sleep(0)

    other = asyncio.create_task(other_work())
    try:
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        listeners.deliver(
            CommittedReading(device, "temperature", "C", now_ms, 21.5) for device in ids
        )
        await asyncio.wait_for(publisher.relayed.wait(), 10)
    finally:
        other.cancel()
        await discovery.stop()

    longest = run = 0
    for entry in log:
        run = run + 1 if entry == "write" else 0
        longest = max(longest, run)
    assert not publisher.topics
    # A few hundred series to a write, not one write each; the farm's work between them.
    assert publisher.largest <= 300, f"{publisher.largest} series in one step of the event loop"
    assert log.count("write") < SENSORS / 100
    assert longest == 1, f"{longest} writes in one step of the event loop"
