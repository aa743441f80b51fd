"""Device availability from LWT/status topics and silence timeouts, on an injected clock.

Rules:
- A status topic (Tasmota ``tele/<t>/LWT``, ESPHome ``<node>/status``) is authoritative: the
  firmware publishes "online" on every connect before anything else, and the broker publishes
  the retained last will "offline" when the connection dies.
- Without a status report yet, any message from the device means it is online.
- With a silence timeout, a device that has sent nothing (status included) for that long is
  offline until it sends again. A registered device never heard from goes offline after one
  timeout from when tracking started.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["AvailabilityChange", "AvailabilityTracker"]

Reason = Literal["status", "message", "silence"]


@dataclass(frozen=True, slots=True)
class AvailabilityChange:
    """A device became online or offline; ``at`` is the tracker's clock."""

    device_id: str
    online: bool
    reason: Reason
    at: float


@dataclass(slots=True)
class _Device:
    silence_timeout: float | None
    last_seen: float
    status: bool | None = None
    online: bool | None = None


class AvailabilityTracker:
    """Tracks online/offline per device; reports only transitions."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._devices: dict[str, _Device] = {}

    def track(self, device_id: str, silence_timeout: float | None) -> None:
        """Start tracking a device (again); its state is unknown until it reports."""
        self._devices[device_id] = _Device(silence_timeout, last_seen=self._clock())

    def forget(self, device_id: str) -> None:
        """Stop tracking a device."""
        self._devices.pop(device_id, None)

    def is_online(self, device_id: str) -> bool | None:
        """True/False, or None while unknown (or not tracked)."""
        device = self._devices.get(device_id)
        return None if device is None else device.online

    def observe_status(self, device_id: str, online: bool) -> AvailabilityChange | None:
        """The device's status topic said online or offline."""
        device = self._devices.get(device_id)
        if device is None:
            return None
        device.last_seen = self._clock()
        device.status = online
        return self._set(device_id, device, online, "status")

    def observe_message(self, device_id: str) -> AvailabilityChange | None:
        """The device sent something other than a status report."""
        device = self._devices.get(device_id)
        if device is None:
            return None
        device.last_seen = self._clock()
        if device.status is False:
            # The last will said offline and no "online" followed: a stale message in flight.
            return None
        return self._set(device_id, device, True, "message")

    def expire(self) -> list[AvailabilityChange]:
        """Mark devices silent for longer than their timeout offline; return the changes."""
        now = self._clock()
        changes: list[AvailabilityChange] = []
        for device_id, device in self._devices.items():
            timeout = device.silence_timeout
            if timeout is None or device.online is False or now - device.last_seen < timeout:
                continue
            change = self._set(device_id, device, False, "silence")
            if change is not None:
                changes.append(change)
        return changes

    def next_deadline(self) -> float | None:
        """The earliest clock time at which expire() could change something."""
        deadlines = [
            device.last_seen + device.silence_timeout
            for device in self._devices.values()
            if device.silence_timeout is not None and device.online is not False
        ]
        return min(deadlines, default=None)

    def _set(
        self, device_id: str, device: _Device, online: bool, reason: Reason
    ) -> AvailabilityChange | None:
        if device.online is online:
            return None
        device.online = online
        return AvailabilityChange(device_id, online, reason, self._clock())
