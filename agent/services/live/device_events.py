"""What the device runtime tells the live streams: availability, state, command outcomes, faults.

The kinds are the event names client libraries know on ``/ws/device-events``
(``status-update`` and ``error``; docs/design.md section 7). Readings do not come this way:
they reach listeners through ``ReadingWriter.subscribe`` once committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = ["DeviceEvent", "DeviceEventHook", "EventKind"]

EventKind = Literal["status-update", "error"]


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    """One thing that happened to a device; ``data["event"]`` says which.

    ``data["event"]`` is one of ``availability`` (``status``, ``reason``), ``state``
    (``state``), ``command`` (``command``, ``value``, ``outcome``, ``detail``) or ``fault``
    (``message``).
    """

    kind: EventKind
    device_id: str
    farm_id: str
    data: Mapping[str, Any]
    at: datetime


DeviceEventHook = Callable[[DeviceEvent], None]
"""Called on the event loop for every event; must not block (queue the event and return)."""
