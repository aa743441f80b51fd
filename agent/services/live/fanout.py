"""The in-process fan-out that carries live farm events to the WebSocket streams (docs/design.md 7).

Producers call the ``publish_*`` methods from the event loop; they never wait. Each stream client
holds an :class:`~protocol.live.outbox.Outbox` with its own filter and bound, so what one
client does has no effect on producers or on other clients.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from agent.services.readings.listeners import CommittedReading
from protocol.live.fanout import FanoutStats, StreamFanout
from protocol.live.outbox import Stream, StreamEvent
from protocol.timefmt import from_ms, iso, utcnow

__all__ = ["DeviceEventLike", "EventFanout", "FanoutStats", "FarmStatusChange"]

log = logging.getLogger(__name__)


class DeviceEventLike(Protocol):
    """What the device runtime publishes (``agent.services.live.device_events.DeviceEvent``)."""

    @property
    def kind(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def farm_id(self) -> str: ...
    @property
    def data(self) -> Mapping[str, Any]: ...
    @property
    def at(self) -> datetime: ...


@dataclass(frozen=True, slots=True)
class FarmStatusChange:
    """A farm changed (``status`` is ``deleted`` when it is gone); ``data`` says how."""

    farm_id: str
    status: str
    data: Mapping[str, Any] = field(default_factory=dict)
    at: datetime = field(default_factory=utcnow)


class EventFanout(StreamFanout):
    """The agent's fan-out: the generic fan-out plus the agent's own event types."""

    def publish_device_event(self, event: DeviceEventLike) -> None:
        """A device's ``status-update`` or ``error``, for /ws/device-events."""
        self.publish(
            StreamEvent(
                stream=Stream.DEVICE_EVENTS,
                type=event.kind,
                farm_id=event.farm_id,
                data={"device_id": event.device_id, **event.data},
                at=event.at,
                device_id=event.device_id,
            )
        )

    def publish_farm_status(self, change: FarmStatusChange) -> None:
        """A farm's status change, for /ws/farm-status."""
        self.publish(
            StreamEvent(
                stream=Stream.FARM_STATUS,
                type="farm-status",
                farm_id=change.farm_id,
                data={"status": change.status, **change.data},
                at=change.at,
            )
        )

    def publish_reading(self, farm_id: str, reading: CommittedReading) -> None:
        """A committed, calibrated reading of a device on ``farm_id``, for /ws/sensor-data."""
        self.publish(
            StreamEvent(
                stream=Stream.SENSOR_DATA,
                type="reading",
                farm_id=farm_id,
                data={
                    "device_id": reading.device_id,
                    "metric": reading.metric,
                    "unit": reading.unit,
                    "value": reading.value,
                    "raw": reading.raw,
                    "received_at": (
                        None if reading.received_ts is None else iso(from_ms(reading.received_ts))
                    ),
                },
                at=from_ms(reading.ts),
                device_id=reading.device_id,
                metric=reading.metric,
            )
        )
