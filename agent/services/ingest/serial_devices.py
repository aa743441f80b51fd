"""Registered serial sensors (Atlas Scientific EZO circuits): each port kept open and polled.

One ``SerialPoller`` per device owns its port's supervisor and a polling task. A reading is
asked for every ``interval`` seconds (``R``; EZO datasheets, UART "R" command), except while a
technician calibrates the device, and goes to the reading writer like an MQTT reading does.
The device is online after a successful reading, offline when its port is gone or no reading
has succeeded for the profile's ``silence_timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from agent.devices.codec import Measurement
from agent.devices.errors import DeviceError
from agent.devices.ezo import EzoCircuit, EzoEc, EzoPh, ezo_framing
from agent.devices.serial_port import SerialPort
from agent.services.calibration.runtime import EzoDevices
from agent.services.devices.registry import DeviceBinding
from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait

__all__ = ["SerialDevices", "SerialOptions", "SerialReports"]

log = logging.getLogger(__name__)

_DEFAULT_SILENCE_S = 60.0


@dataclass(frozen=True)
class SerialOptions:
    """How serial devices are run: poll interval, the adapters calibration uses, reopen pace."""

    interval: float
    ezo: EzoDevices
    busy: Callable[[str], bool] = lambda _: False
    """True while a device is being calibrated (see ``CalibrationService.in_progress``)."""
    backoff: Backoff | None = None


class SerialReports:
    """Where pollers report; implemented by the device runtime."""

    def __init__(
        self,
        measurements: Callable[[str, Sequence[Measurement], datetime], Awaitable[None]],
        availability: Callable[[str, bool], Awaitable[None]],
        fault: Callable[[str, str], Awaitable[None]],
        firmware: Callable[[str, str], Awaitable[None]],
        busy: Callable[[str], bool],
        now: Callable[[], datetime],
    ) -> None:
        self.measurements = measurements
        self.availability = availability
        self.fault = fault
        self.firmware = firmware
        self.busy = busy
        """True while the device is being calibrated: polling must not interleave commands."""
        self.now = now


def _circuit(port: SerialPort, binding: DeviceBinding) -> EzoCircuit:
    profile = binding.profile
    if profile.device_type == "ph_sensor":
        return EzoPh(port, profile)
    if profile.device_type == "ec_sensor":
        return EzoEc(port, profile)
    return EzoCircuit(port, profile)


class SerialPoller:
    """One serial device: its port, its adapter and its polling loop."""

    def __init__(
        self,
        binding: DeviceBinding,
        reports: SerialReports,
        interval: float,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.binding = binding
        self._reports = reports
        self._interval = interval
        self._clock = clock
        settings = binding.serial_settings()
        serial = binding.profile.serial
        assert serial is not None  # serial_settings() raised otherwise
        self.port = SerialPort(settings, ezo_framing(serial), backoff=backoff)
        self.circuit = _circuit(self.port, binding)
        availability = binding.profile.availability
        self._silence = (
            availability.silence_timeout_s
            if availability is not None and availability.silence_timeout_s is not None
            else _DEFAULT_SILENCE_S
        )
        self._online: bool | None = None
        self._firmware: str | None = None
        self._failing = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the port (in the background) and start polling."""
        await self.port.start()
        self._task = asyncio.create_task(self._poll(), name=f"poll {self.binding.device_id}")

    async def stop(self) -> None:
        """Stop polling and close the port."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.port.close()

    async def _poll(self) -> None:
        device_id = self.binding.device_id
        last_success = self._clock()
        while True:
            if not self._reports.busy(device_id):
                try:
                    await self._read_once()
                    last_success = self._clock()
                    await self._set_online(True)
                    self._failing = False
                except DeviceError as err:
                    await self._failed(str(err))
                except Exception as err:  # a bug must not end polling for good
                    log.exception("device %s: polling failed", device_id)
                    await self._failed(f"internal error: {err!r}")
                if not self.port.connected or self._clock() - last_success >= self._silence:
                    await self._set_online(False)
            await asyncio.sleep(self._interval)

    async def _read_once(self) -> None:
        if not self.port.connected:
            await self.port.wait_connected(within=min(self._interval, 5.0))
        decoded = await self.circuit.read()
        device_id = self.binding.device_id
        if decoded.measurements:
            await self._reports.measurements(device_id, decoded.measurements, self._reports.now())
        for rejection in decoded.rejected:
            log.warning("device %s: %s %s", device_id, rejection.name, rejection.reason)
        info = self.circuit.info_cache
        if info is not None and info.firmware != self._firmware:
            self._firmware = info.firmware
            await self._reports.firmware(device_id, info.firmware)

    async def _failed(self, message: str) -> None:
        if self._failing:
            return  # one fault event per outage, not one per poll
        self._failing = True
        log.warning("device %s: reading failed: %s", self.binding.device_id, message)
        await self._reports.fault(self.binding.device_id, message)

    async def _set_online(self, online: bool) -> None:
        if self._online is online:
            return
        self._online = online
        await self._reports.availability(self.binding.device_id, online)


class SerialDevices:
    """The open serial devices by id; the EZO adapters are shared with calibration."""

    def __init__(self, reports: SerialReports, options: SerialOptions) -> None:
        self._reports = reports
        self._interval = options.interval
        self.ezo = options.ezo
        self._backoff = options.backoff
        self._pollers: dict[str, SerialPoller] = {}

    def __contains__(self, device_id: object) -> bool:
        return device_id in self._pollers

    async def add(self, binding: DeviceBinding) -> None:
        """Open and poll a device (replacing an earlier binding of it)."""
        await self.remove(binding.device_id)
        poller = SerialPoller(binding, self._reports, self._interval, backoff=self._backoff)
        self._pollers[binding.device_id] = poller
        self.ezo.add(binding.device_id, poller.circuit)
        await poller.start()

    async def remove(self, device_id: str) -> None:
        """Stop polling a device and close its port."""
        poller = self._pollers.pop(device_id, None)
        if poller is None:
            return
        self.ezo.remove(device_id)
        await poller.stop()

    async def close(self) -> None:
        """Close every port."""
        for device_id in list(self._pollers):
            await self.remove(device_id)
