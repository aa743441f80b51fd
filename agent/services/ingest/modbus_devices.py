"""Registered Modbus devices, grouped by the bus they are on: one ``ModbusBus`` per RS-485
port or TCP endpoint, polling its devices one request at a time.

A device's bus comes from its address (``serial_settings`` of its registration: port or host,
unit id, line settings over the profile's). A bus is opened with its first device and closed
with its last. The scan of a bus (``agent.devices.modbus.scan``) borrows the open bus when there
is one, so that it never talks over the polls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agent.devices.codec import Command
from agent.devices.errors import DeviceUnavailable
from agent.devices.gateway import CommandResult
from agent.devices.modbus.bus import BusAddress, LinkStats, ModbusBus, ModbusReports
from agent.devices.modbus.codec import ModbusCodec
from agent.services.devices.registry import DeviceBinding

__all__ = ["ModbusDevices", "bus_address"]

log = logging.getLogger(__name__)


def bus_address(settings: dict[str, Any], profile_line: tuple[int, int, str, int]) -> BusAddress:
    """The bus of a device address (a registration's Modbus address, as stored)."""
    baudrate, bytesize, parity, stopbits = profile_line
    if settings.get("host") is not None:
        return BusAddress(host=str(settings["host"]), tcp_port=int(settings.get("tcp_port") or 502))
    return BusAddress(
        port=str(settings["port"]),
        baudrate=int(settings.get("baudrate") or baudrate),
        bytesize=int(settings.get("bytesize") or bytesize),
        parity=str(settings.get("parity") or parity),
        stopbits=int(settings.get("stopbits") or stopbits),
    )


class ModbusDevices:
    """The buses by key and which bus each device is on."""

    def __init__(self, reports: ModbusReports, now: Callable[[], datetime]) -> None:
        self._reports = reports
        self._now = now
        self.buses: dict[str, ModbusBus] = {}
        self._bus_of: dict[str, str] = {}

    def __contains__(self, device_id: object) -> bool:
        return device_id in self._bus_of

    async def add(self, binding: DeviceBinding) -> None:
        """Poll a device on its bus (opening the bus with its first device)."""
        await self.remove(binding.device_id)
        spec = binding.profile.modbus
        if spec is None:
            raise ValueError(f"device {binding.device_id}: profile is not a Modbus profile")
        settings = dict(binding.serial_overrides)
        line = (spec.baudrate, spec.bytesize, spec.parity, spec.stopbits)
        address = bus_address(settings, line)
        bus = self.buses.get(address.key)
        if bus is not None and address.port is not None and bus.address.line != address.line:
            log.warning(
                "device %s: line settings %s differ from its bus's %s; the bus's are used",
                binding.device_id,
                address.line,
                bus.address.line,
            )
        if bus is None:
            bus = ModbusBus(address, self._reports, now=self._now, timeout=spec.timeout_s)
            self.buses[address.key] = bus
            bus.start()
        bus.add(binding.device_id, int(settings["unit"]), ModbusCodec(binding.profile))
        self._bus_of[binding.device_id] = address.key

    async def remove(self, device_id: str) -> None:
        """Stop polling a device; its bus closes with its last device."""
        key = self._bus_of.pop(device_id, None)
        if key is None:
            return
        bus = self.buses[key]
        bus.remove(device_id)
        if not bus.devices:
            del self.buses[key]
            await bus.close()

    def bus(self, key: str) -> ModbusBus | None:
        """The open bus of this key (``/dev/ttyUSB0``, ``tcp://host:502``), if any."""
        return self.buses.get(key)

    def link(self, device_id: str) -> LinkStats | None:
        """A device's link counters, while it is polled."""
        key = self._bus_of.get(device_id)
        if key is None:
            return None
        device = self.buses[key].devices.get(device_id)
        return device.stats if device is not None else None

    def links(self) -> dict[str, LinkStats]:
        """Every polled device's link counters by device id."""
        return {
            device_id: device.stats
            for bus in self.buses.values()
            for device_id, device in bus.devices.items()
        }

    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult:  # noqa: ASYNC109
        """Write a command to a device and confirm it by reading its state back."""
        key = self._bus_of.get(device_id)
        if key is None:
            raise DeviceUnavailable(f"device {device_id} is not connected to the agent")
        return await self.buses[key].send(device_id, command, timeout)

    async def close(self) -> None:
        """Close every bus."""
        for device_id in list(self._bus_of):
            await self.remove(device_id)
