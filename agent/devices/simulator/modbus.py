"""Simulated Modbus devices on pymodbus's own server, over a pty pair (RTU) or local TCP.

Each ``SimulatedModbusDevice`` plays one shipped profile at one unit id: its metrics sit in the
registers the profile names (encoded with the profile's type, word order, scale and offset), and
writes to an actuator's command registers move its read-back state registers the way the real
device does (a VFD's run/stop and frequency command). A device can be told to stay silent
(requests time out) or to garble its answers (bad CRC); every request and answer the server
sees is logged, so a test can check that no two requests were ever on the wire at once.

``ModbusRtuSimulator`` serves a bus of devices on the far end of a pseudo-terminal pair: the
agent opens ``path`` like a USB RS-485 adapter. ``ModbusTcpSimulator`` serves them on a local
TCP port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import socket
import struct
import time
import tty
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pymodbus.constants import ExcCodes
from pymodbus.framer import FramerType
from pymodbus.pdu import ModbusPDU
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from agent.devices.modbus_spec import ModbusMetric, ModbusSpec
from agent.devices.profiles import FirmwareProfile

__all__ = [
    "ModbusRtuSimulator",
    "ModbusTcpSimulator",
    "RequestLog",
    "SimulatedModbusDevice",
]

_STRUCT = {"int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "float32": ">f"}
#: Function codes by register table: reads and writes of holding registers, input registers.
_HOLDING = frozenset({3, 6, 16})
_INPUT = frozenset({4})


def encode(value: float, metric: ModbusMetric, spec: ModbusSpec) -> list[int]:
    """The registers a device sends for ``value`` of ``metric`` (the inverse of decoding)."""
    raw = (value - metric.offset) / metric.scale
    number: float | int = raw if metric.type == "float32" else round(raw)
    if metric.type != "float32":
        bits = 16 if metric.type.endswith("16") else 32
        low, high = (
            (0, 2**bits - 1)
            if metric.type.startswith("u")
            else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
        number = min(high, max(low, int(number)))
    data = struct.pack(_STRUCT[metric.type], number)
    words = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    return list(reversed(words)) if spec.word_order_of(metric) == "little" else words


class SimulatedModbusDevice:
    """One device of a shipped Modbus profile at one unit id."""

    def __init__(
        self,
        unit: int,
        profile: FirmwareProfile,
        *,
        drift: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        if profile.modbus is None:
            raise ValueError(f"profile {profile.id} is not a Modbus profile")
        self.unit = unit
        self.profile = profile
        self.spec: ModbusSpec = profile.modbus
        self.values: dict[str, float] = {
            m.name: m.typical if m.typical is not None else (m.min + m.max) / 2
            for m in self.spec.metrics
        }
        self.silent = False
        """Answer nothing (the client times out)."""
        self.garble = False
        """Answer with a corrupted CRC (the client drops the frame)."""
        self.apply_writes = True
        """Accept command writes without acting on them when False (a drive in local mode)."""
        self._drift = drift
        self._rng = rng or random.Random(unit)
        self._holding = self._span((*self._registers("holding"), *self._writes("holding")))
        self._input = self._span(self._registers("input"))
        self._coils = self._span((*self._registers("coil"), *self._writes("coil")))
        self._discrete = self._span(self._registers("discrete"))

    def _registers(self, function: str) -> list[tuple[int, int]]:
        items = [*self.spec.metrics, *self.spec.states]
        return [(i.address, i.width) for i in items if i.function == function]

    def _writes(self, function: str) -> list[tuple[int, int]]:
        return [(w.address, 1) for w in self.spec.writes if w.function == function]

    @staticmethod
    def _span(ranges: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
        if not ranges:
            return None
        start = min(address for address, _ in ranges)
        end = max(address + width for address, width in ranges)
        return start, end - start

    def sim_device(self) -> SimDevice:
        """The pymodbus simulator device serving this device's registers."""

        def block(span: tuple[int, int] | None) -> list[SimData]:
            if span is None:  # pymodbus wants every table; this one answers "illegal address"
                return [SimData(0, count=1, datatype=DataType.INVALID)]
            return [SimData(span[0], count=span[1], values=0, datatype=DataType.REGISTERS)]

        def bits(span: tuple[int, int] | None) -> list[SimData]:
            # Coils and discrete inputs from bit 0 up to the last one the profile uses; a coil
            # written keeps its value, so a relay's read-back shows the command.
            end = 1 if span is None else span[0] + span[1]
            return [SimData(0, count=end, values=False, datatype=DataType.BITS)]

        return SimDevice(
            id=self.unit,
            simdata=(
                bits(self._coils),
                bits(self._discrete),
                block(self._holding),
                block(self._input),
            ),
            action=self._action,
        )

    async def _action(
        self,
        function_code: int,
        start_address: int,
        address: int,
        count: int,
        registers: list[int],
        set_values: list[int] | list[bool] | None,
    ) -> ExcCodes | None:
        function = "holding" if function_code in _HOLDING else "input"
        if function_code in _HOLDING | _INPUT:
            self._fill(function, start_address, registers)
        if set_values is not None and function_code in (6, 16) and self.apply_writes:
            for offset, value in enumerate(set_values):
                self._apply_write(address + offset, int(value), start_address, registers)
        return None

    def _fill(self, function: str, start: int, registers: list[int]) -> None:
        for metric in self.spec.metrics:
            if metric.function != function:
                continue
            value = self.values[metric.name]
            if self._drift:
                span = metric.max - metric.min
                value += self._rng.uniform(-0.002, 0.002) * span
                typical = metric.typical if metric.typical is not None else value
                value = min(metric.max, max(metric.min, value + (typical - value) * 0.05))
                self.values[metric.name] = value
            words = encode(value, metric, self.spec)
            offset = metric.address - start
            registers[offset : offset + len(words)] = words

    def _apply_write(self, address: int, value: int, start: int, registers: list[int]) -> None:
        """A write to a command register moves the state registers it drives."""
        for write in self.spec.writes:
            if write.address != address:
                continue
            if write.when in ("on", "off") and write.value is not None and write.value != value:
                continue
            for state in self.spec.states:
                if state.function != "holding":
                    continue
                raw: int | None = None
                if state.full_scale is not None and write.full_scale is not None:
                    if state.field == write.command:
                        raw = round(value * state.full_scale / write.full_scale)
                elif state.full_scale is None and write.when != "always":
                    raw = state.on if write.when == "on" else 0
                elif state.full_scale is None and state.field == write.command:
                    raw = state.on if value else 0
                if raw is not None:
                    registers[state.address - start] = raw


@dataclass
class RequestLog:
    """Requests and answers as the server saw them, in order, with their monotonic times."""

    events: list[tuple[float, str, int]] = field(default_factory=list)

    def record(self, kind: str, unit: int) -> None:
        """Log one request (``request``) or answer (``answer``) of unit ``unit``."""
        self.events.append((time.monotonic(), kind, unit))

    @property
    def requests(self) -> int:
        """How many requests arrived."""
        return sum(1 for _, kind, _ in self.events if kind == "request")

    def overlaps(self, answering: Iterable[int]) -> int:
        """Requests that arrived while an earlier request to an answering unit was unanswered."""
        live = set(answering)
        pending: int | None = None
        overlaps = 0
        for _, kind, unit in self.events:
            if kind == "request":
                if pending is not None:
                    overlaps += 1
                pending = unit if unit in live else None
            else:
                pending = None
        return overlaps


class _ModbusSimulator:
    """Shared by the RTU and TCP simulators: devices, the server's hooks and the log."""

    def __init__(self, devices: Iterable[SimulatedModbusDevice]) -> None:
        self.devices = {device.unit: device for device in devices}
        self.log = RequestLog()
        self._server: ModbusSerialServer | ModbusTcpServer | None = None

    def device(self, unit: int) -> SimulatedModbusDevice:
        """The simulated device at ``unit``."""
        return self.devices[unit]

    def _trace_pdu(self, sending: bool, pdu: ModbusPDU) -> ModbusPDU:
        self.log.record("answer" if sending else "request", pdu.dev_id)
        return pdu

    def _trace_packet(self, sending: bool, data: bytes, unit_at: int) -> bytes:
        if not sending or len(data) <= unit_at:
            return data
        device = self.devices.get(data[unit_at])
        if device is not None and device.silent:
            return b""
        if device is not None and device.garble:
            return data[:-1] + bytes([data[-1] ^ 0xFF])
        return data

    def _contexts(self) -> list[SimDevice]:
        return [device.sim_device() for device in self.devices.values()]

    async def stop(self) -> None:
        """Stop serving."""
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown()  # type: ignore[no-untyped-call]


class ModbusTcpSimulator(_ModbusSimulator):
    """Devices behind one Modbus TCP endpoint on 127.0.0.1 (unit id per device)."""

    def __init__(self, devices: Iterable[SimulatedModbusDevice], port: int = 0) -> None:
        super().__init__(devices)
        self._port = port
        self.port = 0

    async def start(self) -> None:
        """Listen on the port (a free one when 0); ``port`` tells which."""
        port = self._port or _free_port()
        server = ModbusTcpServer(
            self._contexts(),
            address=("127.0.0.1", port),
            ignore_missing_devices=True,
            trace_pdu=self._trace_pdu,
            trace_packet=lambda sending, data: self._trace_packet(sending, data, 6),
        )
        await server.serve_forever(background=True)
        self._server = server
        self.port = port


class ModbusRtuSimulator(_ModbusSimulator):
    """An RS-485 bus of devices at the far end of a pty pair; the agent opens ``path``."""

    def __init__(
        self,
        devices: Iterable[SimulatedModbusDevice],
        path: Path,
        *,
        baudrate: int = 9600,
        parity: str = "N",
        stopbits: int = 1,
    ) -> None:
        super().__init__(devices)
        self.path = path
        self._line = (baudrate, parity, stopbits)
        self._bridge: _PtyBridge | None = None

    async def start(self) -> None:
        """Create the pty pair, link ``path`` to the agent's end and serve the other."""
        self._bridge = _PtyBridge(self.path)
        device_end = self._bridge.open()
        baudrate, parity, stopbits = self._line
        server = ModbusSerialServer(
            self._contexts(),
            framer=FramerType.RTU,
            port=device_end,
            baudrate=baudrate,
            parity=parity,
            stopbits=stopbits,
            ignore_missing_devices=True,
            trace_pdu=self._trace_pdu,
            trace_packet=lambda sending, data: self._trace_packet(sending, data, 0),
        )
        await server.serve_forever(background=True)
        self._server = server

    async def stop(self) -> None:
        """Stop serving and remove the pty pair."""
        await super().stop()
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()


class _PtyBridge:
    """Two pseudo-terminals joined like a null-modem cable: bytes written to one end's slave
    come out of the other's. ``path`` links to the agent's end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fds: list[int] = []
        self._masters: tuple[int, int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self) -> str:
        """Create both ptys; returns the device end's slave path."""
        self._loop = asyncio.get_running_loop()
        ends = []
        for _ in range(2):
            master, slave = os.openpty()
            tty.setraw(slave)
            os.set_blocking(master, False)
            self._fds += [master, slave]
            ends.append((master, os.ttyname(slave)))
        (agent_master, agent_tty), (device_master, device_tty) = ends
        self._masters = (agent_master, device_master)
        tmp = self.path.with_name(self.path.name + ".new")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(agent_tty)
        tmp.replace(self.path)
        self._loop.add_reader(agent_master, self._copy, agent_master, device_master)
        self._loop.add_reader(device_master, self._copy, device_master, agent_master)
        return device_tty

    @staticmethod
    def _copy(source: int, target: int) -> None:
        try:
            data = os.read(source, 4096)
        except (BlockingIOError, OSError):
            return
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(target, data)

    def close(self) -> None:
        """Close both ptys and remove the link."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if self._masters is not None and self._loop is not None:
            for master in self._masters:
                self._loop.remove_reader(master)
        self._masters = None
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _serve(args: argparse.Namespace) -> None:
    from agent.devices.profiles import load_profiles
    from agent.settings import DEFAULT_PROFILES_DIR

    profiles = load_profiles(args.profiles or DEFAULT_PROFILES_DIR)
    devices = []
    for spec in args.device:
        profile_id, _, unit = spec.partition(":")
        devices.append(SimulatedModbusDevice(int(unit), profiles[profile_id], drift=True))
    simulator: ModbusRtuSimulator | ModbusTcpSimulator
    if args.rtu is not None:
        simulator = ModbusRtuSimulator(devices, Path(args.rtu))
        await simulator.start()
        print(f"Modbus RTU bus at {args.rtu}", flush=True)
    else:
        simulator = ModbusTcpSimulator(devices, args.tcp)
        await simulator.start()
        print(f"Modbus TCP at 127.0.0.1:{simulator.port}", flush=True)
    for device in devices:
        print(f"{device.profile.id} unit {device.unit}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await simulator.stop()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m agent.devices.simulator.modbus --rtu /tmp/ttyRS485 --device
    modbus-xy-md02:1 --device modbus-vfd-fan:7`` (or ``--tcp 5020``): serve until interrupted."""
    parser = argparse.ArgumentParser(description="Simulated Modbus devices (pymodbus server)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--rtu", help="path to link to the agent's end of a pty pair")
    where.add_argument("--tcp", type=int, help="local TCP port (0: a free one)")
    parser.add_argument(
        "--device", action="append", required=True, help="PROFILE:UNIT, e.g. modbus-xy-md02:1"
    )
    parser.add_argument("--profiles", help="profile directory (default: the shipped profiles)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
