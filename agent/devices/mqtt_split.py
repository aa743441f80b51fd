"""Two MQTT connections behind the gateway's transport: what confirms a command never queues
behind telemetry on the wire.

A broker delivers a connection's messages in order and, past the connection's in-flight
window, only as the earlier ones are acknowledged; the agent acknowledges telemetry once its
readings are committed. On the one connection, a device's state report confirming a command
waited behind everything the broker held for the agent (seconds during a flood of readings).
The topics ``urgent`` picks (devices' state reports, other listeners' topics such as Home
Assistant's commands) are subscribed on their own connection, under its own client id and
broker queue, and commands are published on it. Each topic is subscribed on one connection
only, so its messages keep their order and arrive once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agent.devices.codec import OutgoingMessage
from agent.devices.mqtt import CommitBarrier, MqttClient

__all__ = ["SplitTransport", "without_backpressure"]


class _Unbounded:
    """A commit barrier whose ``room`` never waits; the rest is the wrapped barrier's."""

    def __init__(self, barrier: CommitBarrier) -> None:
        self._barrier = barrier

    def mark(self) -> int:
        """The wrapped barrier's position."""
        return self._barrier.mark()

    async def room(self) -> None:
        """Never waits."""
        return None

    def full(self) -> bool:
        """Never full."""
        return False

    def outcome(self, start: int, end: int) -> bool | None:
        """The wrapped barrier's answer: acknowledgements still wait for the commit."""
        return self._barrier.outcome(start, end)

    async def progress(self) -> None:
        """The wrapped barrier's progress."""
        await self._barrier.progress()

    def closes_at(self) -> float | None:
        """The wrapped barrier's."""
        return self._barrier.closes_at()


def without_backpressure(barrier: CommitBarrier) -> CommitBarrier:
    """``barrier`` for the control connection: its few messages do not wait for room in the
    readings' queue (which a flood of telemetry keeps full), only for their own commit."""
    return _Unbounded(barrier)


class SplitTransport:
    """Subscribes each topic on the telemetry or the control connection; publishes on the
    control connection."""

    def __init__(
        self, telemetry: MqttClient, control: MqttClient, urgent: Callable[[str], bool]
    ) -> None:
        self.telemetry = telemetry
        self.control = control
        self._urgent = urgent

    async def subscribe(self, filters: Iterable[str]) -> None:
        """Subscribe each of ``filters`` on the connection its topic belongs to."""
        wanted = list(filters)
        urgent = [t for t in wanted if self._urgent(t)]
        await self.control.subscribe(urgent)
        # A persistent session from before the split may hold them on the telemetry
        # connection: they would arrive twice.
        await self.telemetry.release(urgent)
        await self.telemetry.subscribe([t for t in wanted if not self._urgent(t)])

    async def unsubscribe(self, filters: Iterable[str]) -> None:
        """Unsubscribe ``filters`` from whichever connection holds them."""
        gone = list(filters)
        await self.control.unsubscribe(gone)
        await self.telemetry.unsubscribe(gone)

    async def publish(self, message: OutgoingMessage, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Publish on the control connection (its outgoing queue is never long)."""
        await self.control.publish(message, timeout)
