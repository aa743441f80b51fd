"""Fixtures for device tests: the shipped profiles, a private Mosquitto, an agent-side gateway."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from agent.devices.availability import AvailabilityChange, AvailabilityTracker
from agent.devices.codec import Measurement, StateUpdate
from agent.devices.gateway import MqttDeviceGateway
from agent.devices.mqtt import InboundMessage, MqttClient, MqttSettings
from agent.devices.profiles import ProfileRegistry, load_profiles
from agent.settings import DEFAULT_PROFILES_DIR
from tests.support.mosquitto import INSTALL_HINT, MOSQUITTO, Mosquitto

PROFILE_DIR = DEFAULT_PROFILES_DIR
WAIT = 10.0  # generous upper bound for "eventually"; tests never assert on durations
_ids = itertools.count()


@pytest.fixture(scope="session")
def profiles() -> ProfileRegistry:
    """The firmware profiles shipped in agent/firmware_profiles/."""
    return load_profiles(PROFILE_DIR)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    """A private Mosquitto on a free port; fails (never skips) when mosquitto is missing."""
    if not MOSQUITTO.exists():
        pytest.fail(INSTALL_HINT)
    server = Mosquitto(tmp_path / "broker")
    await server.start()
    try:
        yield server
    finally:
        await server.stop(kill=True)


def settings_for(broker: Mosquitto, **overrides: object) -> MqttSettings:
    """Agent-side settings for the private broker with quick reconnects."""
    values: dict[str, object] = {
        "host": broker.host,
        "port": broker.port,
        "client_id": f"test-agent-{next(_ids)}",
        "backoff_initial": 0.05,
        "backoff_max": 0.5,
        "timeout": 5.0,
        "keepalive": 5,
    }
    values.update(overrides)
    return MqttSettings(**values)  # type: ignore[arg-type]


async def eventually(predicate: Callable[[], bool], timeout: float = WAIT) -> None:  # noqa: ASYNC109
    """Wait until ``predicate()`` holds; fail after ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            # Polling: the condition is set by other tasks through plain attributes.
            while not predicate():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"condition not reached within {timeout} s")


@dataclass
class RecordingSink:
    """A DeviceEventSink that keeps everything it is given."""

    readings: list[tuple[str, Measurement]] = field(default_factory=list)
    reported: list[tuple[str, StateUpdate]] = field(default_factory=list)
    changes: list[AvailabilityChange] = field(default_factory=list)

    async def measurements(
        self, device_id: str, measurements: Sequence[Measurement], received_at: datetime
    ) -> None:
        self.readings.extend((device_id, m) for m in measurements)

    async def states(
        self, device_id: str, states: Sequence[StateUpdate], received_at: datetime
    ) -> None:
        self.reported.extend((device_id, s) for s in states)

    async def availability(self, change: AvailabilityChange) -> None:
        self.changes.append(change)

    def values(self, device_id: str, metric: str) -> list[float]:
        """Every value received for one device's metric, in order."""
        return [m.value for d, m in self.readings if d == device_id and m.metric == metric]

    def online(self, device_id: str) -> bool | None:
        """The last availability reported for a device."""
        mine = [c.online for c in self.changes if c.device_id == device_id]
        return mine[-1] if mine else None


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Agent:
    """The agent side: one MQTT client feeding one gateway."""

    client: MqttClient
    gateway: MqttDeviceGateway
    sink: RecordingSink
    clock: FakeClock


@pytest.fixture
async def agent(broker: Mosquitto) -> AsyncIterator[Agent]:
    """A connected agent-side MQTT client and gateway on the private broker."""
    sink = RecordingSink()
    clock = FakeClock()
    gateway: MqttDeviceGateway

    async def handle(message: InboundMessage) -> None:
        await gateway.handle(message)

    client = MqttClient(settings_for(broker), handle)
    gateway = MqttDeviceGateway(
        client, sink, availability=AvailabilityTracker(clock), clock=clock, log_interval=60.0
    )
    async with client:
        await client.wait_connected(WAIT)
        yield Agent(client, gateway, sink, clock)
