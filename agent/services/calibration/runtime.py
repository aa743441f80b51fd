"""What calibration needs from the device runtime, and the corrections it gives back.

The runtime (serial ports, reading writer) starts after the services, so it attaches these to
the CalibrationService once it runs: an ``EzoProvider`` for on-device procedures and, if it can,
a ``LatestRaw`` source so technicians need not type the raw value of an agent-side point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agent.devices.calibration import LinearCalibration, apply
from agent.devices.ezo import EzoCircuit

__all__ = ["ActiveCalibration", "EzoDevices", "EzoProvider", "LatestRaw"]


class EzoProvider(Protocol):
    """Gives the EZO adapter (on its serial port) for a device id, or None."""

    def ezo_for(self, device_id: str) -> EzoCircuit | None: ...


class LatestRaw(Protocol):
    """The newest raw (uncorrected) reading of a device's metric, if recent enough to use."""

    async def latest_raw(self, device_id: str, metric: str) -> float | None: ...


class EzoDevices:
    """A plain EzoProvider: the runtime adds each serial device's adapter as it opens it."""

    def __init__(self) -> None:
        self._devices: dict[str, EzoCircuit] = {}

    def add(self, device_id: str, ezo: EzoCircuit) -> None:
        """Make ``ezo`` the adapter of ``device_id``."""
        self._devices[device_id] = ezo

    def remove(self, device_id: str) -> None:
        """Forget a device's adapter."""
        self._devices.pop(device_id, None)

    def ezo_for(self, device_id: str) -> EzoCircuit | None:
        """The adapter of ``device_id``, if any."""
        return self._devices.get(device_id)


@dataclass(frozen=True)
class ActiveCalibration:
    """The agent-side corrections in force for one device, by metric.

    Metrics calibrated on the device, or not at all, have no entry and pass unchanged.
    """

    corrections: Mapping[str, LinearCalibration] = field(default_factory=dict)

    def apply(self, metric: str, raw: float) -> float:
        """The corrected value of a raw reading of ``metric``."""
        correction = self.corrections.get(metric)
        return raw if correction is None else apply(correction, raw)
