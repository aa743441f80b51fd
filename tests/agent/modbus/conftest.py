"""Fixtures: a bus of simulated Modbus devices (pymodbus's server) over a pty pair or TCP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest

from agent.devices.codec import Measurement, StateUpdate
from agent.devices.modbus.bus import BusAddress, ModbusBus
from agent.devices.modbus.codec import ModbusCodec
from agent.devices.profiles import FirmwareProfile, load_profiles
from agent.devices.simulator.modbus import (
    ModbusRtuSimulator,
    ModbusTcpSimulator,
    SimulatedModbusDevice,
)
from agent.settings import DEFAULT_PROFILES_DIR

PROFILES = load_profiles(DEFAULT_PROFILES_DIR)
CLIMATE = PROFILES["modbus-xy-md02"]
CO2 = PROFILES["modbus-senseair-s8"]
VFD = PROFILES["modbus-vfd-fan"]
#: Generous: these wait for conditions, they never measure time.
WAIT_S = 20.0


def fast(profile: FirmwareProfile, interval: float = 0.05) -> FirmwareProfile:
    """The profile polled every ``interval`` s with a short reply timeout (tests only)."""
    assert profile.modbus is not None
    spec = profile.modbus.model_copy(update={"poll_interval_s": interval, "timeout_s": 0.2})
    return profile.model_copy(update={"modbus": spec})


@dataclass
class Recorder:
    """What a bus reported, with an event per report to wait on."""

    measurements: list[tuple[str, Measurement]] = field(default_factory=list)
    states: list[tuple[str, StateUpdate]] = field(default_factory=list)
    availability: list[tuple[str, bool]] = field(default_factory=list)
    faults: list[tuple[str, str]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def measurements_(self, device_id: str, items: Sequence[Measurement]) -> None:
        self.measurements += [(device_id, m) for m in items]
        self.changed.set()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition`` holds (after any report)."""
        async with asyncio.timeout(WAIT_S):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


class RecordingReports:
    """ModbusReports that keep everything in a Recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.r = recorder

    async def measurements(
        self, device_id: str, measurements: Sequence[Measurement], received_at: datetime
    ) -> None:
        await self.r.measurements_(device_id, measurements)

    async def states(
        self, device_id: str, states: Sequence[StateUpdate], received_at: datetime
    ) -> None:
        self.r.states += [(device_id, s) for s in states]
        self.r.changed.set()

    async def modbus_availability(self, device_id: str, online: bool) -> None:
        self.r.availability.append((device_id, online))
        self.r.changed.set()

    async def modbus_fault(self, device_id: str, message: str) -> None:
        self.r.faults.append((device_id, message))
        self.r.changed.set()


Simulator = ModbusRtuSimulator | ModbusTcpSimulator


@dataclass
class Line:
    """A simulated bus, the agent's bus on it, and what the agent's bus reported."""

    sim: Simulator
    bus: ModbusBus
    recorder: Recorder

    def add(self, device_id: str, unit: int, profile: FirmwareProfile) -> None:
        self.bus.add(device_id, unit, ModbusCodec(profile))


LineFactory = Callable[[Literal["rtu", "tcp"], list[SimulatedModbusDevice]], Awaitable[Line]]


@pytest.fixture
async def line(tmp_path: Path) -> AsyncIterator[LineFactory]:
    """Start simulated buses (RTU over a pty pair, or TCP) and the agent's bus on each."""
    opened: list[Line] = []

    async def factory(kind: Literal["rtu", "tcp"], devices: list[SimulatedModbusDevice]) -> Line:
        sim: Simulator
        if kind == "rtu":
            sim = ModbusRtuSimulator(devices, tmp_path / f"ttyRS485-{len(opened)}")
            await sim.start()
            address = BusAddress(port=str(sim.path))
        else:
            sim = ModbusTcpSimulator(devices)
            await sim.start()
            address = BusAddress(host="127.0.0.1", tcp_port=sim.port)
        recorder = Recorder()
        bus = ModbusBus(
            address, RecordingReports(recorder), now=lambda: datetime.now(UTC), timeout=0.2
        )
        made = Line(sim, bus, recorder)
        opened.append(made)
        return made

    yield factory
    for made in opened:
        await made.bus.close()
        await made.sim.stop()
