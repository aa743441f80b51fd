"""Typed messages of the WebSocket streams (docs/design.md section 7; protocol/streams.py).

A server message is ``{"type", "farm_id", "data", "timestamp", "seq"}``. The device event stream
carries ``status-update`` and ``error`` (the event names client libraries know),
each naming its device and, in ``data["event"]``, what happened: ``availability``, ``state``,
``command`` or ``fault``. Gaps are reported as :class:`Missed`, whatever their cause.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "DeviceError",
    "DeviceEvent",
    "FarmStatus",
    "Missed",
    "Reading",
    "StatusUpdate",
    "parse_device_event",
    "parse_farm_status",
    "parse_reading",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A device changed: came online or went offline, reported state, confirmed a command."""

    type: Literal["status-update"]
    farm_id: str
    device_id: str
    event: str
    data: dict[str, Any]
    timestamp: datetime
    seq: int


@dataclass(frozen=True, slots=True)
class DeviceError:
    """A device failed: a command timed out or was rejected, or the device reported a fault."""

    type: Literal["error"]
    farm_id: str
    device_id: str
    event: str
    data: dict[str, Any]
    timestamp: datetime
    seq: int

    @property
    def message(self) -> str:
        """What went wrong, in words: the fault message or the command outcome."""
        if "message" in self.data:
            return str(self.data["message"])
        detail = self.data.get("detail")
        outcome = self.data.get("outcome", "failed")
        command = self.data.get("command", self.event)
        return f"{command} {outcome}" + (f": {detail}" if detail else "")


DeviceEvent = StatusUpdate | DeviceError


@dataclass(frozen=True, slots=True)
class FarmStatus:
    """A farm was created, changed or deleted (``status`` is ``deleted`` then)."""

    farm_id: str
    status: str
    data: dict[str, Any]
    timestamp: datetime
    seq: int


@dataclass(frozen=True, slots=True)
class Reading:
    """One committed, calibrated reading; ``timestamp`` is when it was measured."""

    farm_id: str
    device_id: str
    metric: str
    unit: str
    value: float
    raw: float | None
    timestamp: datetime
    received_at: datetime | None
    seq: int


@dataclass(frozen=True, slots=True)
class Missed:
    """Events the caller did not get.

    ``reason`` says why: ``server`` (the agent dropped ``count`` events because this client read
    too slowly), ``sequence`` (``count`` messages missing between two ``seq`` numbers) or
    ``reconnect`` (the connection was lost; ``count`` is unknown, None).
    """

    count: int | None
    reason: Literal["server", "sequence", "reconnect"]


def _time(value: Any) -> datetime:
    # ISO 8601 with a trailing Z (docs/design.md section 3); fromisoformat accepts it from 3.11.
    return datetime.fromisoformat(str(value))


def parse_device_event(message: dict[str, Any]) -> DeviceEvent | None:
    """A ``status-update`` or ``error`` message as a typed event; None for other types."""
    data = dict(message.get("data") or {})
    fields = (
        str(message["farm_id"]),
        str(data.get("device_id", "")),
        str(data.get("event", "")),
        data,
        _time(message["timestamp"]),
        int(message["seq"]),
    )
    if message["type"] == "status-update":
        return StatusUpdate("status-update", *fields)
    if message["type"] == "error":
        return DeviceError("error", *fields)
    log.debug("device stream: ignoring message type %r", message["type"])
    return None


def parse_farm_status(message: dict[str, Any]) -> FarmStatus | None:
    """A ``farm-status`` message as a typed event; None for other types."""
    if message["type"] != "farm-status":
        return None
    data = dict(message.get("data") or {})
    return FarmStatus(
        str(message["farm_id"]),
        str(data.get("status", "")),
        data,
        _time(message["timestamp"]),
        int(message["seq"]),
    )


def parse_reading(message: dict[str, Any]) -> Reading | None:
    """A ``reading`` message as a typed event; None for other types."""
    if message["type"] != "reading":
        return None
    data = message["data"]
    received = data.get("received_at")
    return Reading(
        str(message["farm_id"]),
        str(data["device_id"]),
        str(data["metric"]),
        str(data.get("unit", "")),
        float(data["value"]),
        None if data.get("raw") is None else float(data["raw"]),
        _time(message["timestamp"]),
        None if received is None else _time(received),
        int(message["seq"]),
    )
