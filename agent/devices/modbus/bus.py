"""One Modbus bus (an RS-485 line or a TCP gateway/device) and the devices polled on it.

A ``ModbusBus`` owns one pymodbus client and sends one request at a time: RS-485 is half
duplex and a second master request on the wire would collide with a device's answer, so every
request (polls, command writes and their read-back, scans) waits for the bus's lock. One task
per bus polls its devices, each at its profile's interval, earliest due first.

Each device's link is counted (``LinkStats``): answered polls, timeouts, answers that arrived
but were rejected (bad CRC or framing: bytes came, no valid frame), Modbus exception answers.
A device is offline after ``offline_after`` consecutive failed polls and online again at its
first answered poll.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent.devices.codec import Command, Decoded, Measurement, StateUpdate
from agent.devices.errors import DeviceError, DeviceUnavailable
from agent.devices.gateway import CommandResult
from agent.devices.modbus.codec import ModbusCodec, ReadBlock, Write
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog

if TYPE_CHECKING:
    from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient

__all__ = [
    "BusAddress",
    "LinkStats",
    "ModbusBus",
    "ModbusFailure",
    "ModbusReports",
]

log = logging.getLogger(__name__)
# pymodbus logs every timeout at ERROR; the bus counts them per device and logs at its own pace.
logging.getLogger("pymodbus").setLevel(logging.CRITICAL)

FailureKind = Literal["timeout", "crc", "exception", "connection"]


class ModbusFailure(DeviceError):
    """A request that got no usable answer: timed out, garbled, refused or not sent."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class BusAddress:
    """Where a bus is: a serial port with its line settings (RTU), or a TCP host and port."""

    port: str | None = None
    host: str | None = None
    tcp_port: int = 502
    baudrate: int = 9600
    bytesize: int = 8
    parity: str = "N"
    stopbits: int = 1

    def __post_init__(self) -> None:
        if (self.port is None) == (self.host is None):
            raise ValueError("a Modbus bus is a serial port or a TCP host, not both")

    @property
    def key(self) -> str:
        """Identifies the bus: ``/dev/ttyUSB0`` or ``tcp://10.0.0.5:502``."""
        return self.port if self.port is not None else f"tcp://{self.host}:{self.tcp_port}"

    @property
    def line(self) -> tuple[int, int, str, int]:
        """The serial line settings (all devices of one RS-485 bus share them)."""
        return (self.baudrate, self.bytesize, self.parity, self.stopbits)


@dataclass
class LinkStats:
    """How a device's requests went; exact counters (the log is rate-limited)."""

    polls: int = 0
    answered: int = 0
    timeouts: int = 0
    crc_errors: int = 0
    exceptions: int = 0
    connection_errors: int = 0
    consecutive_failures: int = 0
    online: bool | None = None
    last_error: str = ""

    def count(self, failure: ModbusFailure) -> None:
        """Count one failed request."""
        if failure.kind == "timeout":
            self.timeouts += 1
        elif failure.kind == "crc":
            self.crc_errors += 1
        elif failure.kind == "exception":
            self.exceptions += 1
        else:
            self.connection_errors += 1
        self.last_error = str(failure)


class ModbusReports(Protocol):
    """Where a bus reports what its devices said (implemented by the device runtime)."""

    async def measurements(
        self, device_id: str, measurements: Sequence[Measurement], received_at: datetime
    ) -> None: ...
    async def states(
        self, device_id: str, states: Sequence[StateUpdate], received_at: datetime
    ) -> None: ...
    async def modbus_availability(self, device_id: str, online: bool) -> None: ...
    async def modbus_fault(self, device_id: str, message: str) -> None: ...


@dataclass
class BusDevice:
    """A device on a bus: its unit id, register map, poll pace and link counters."""

    device_id: str
    unit: int
    codec: ModbusCodec
    interval: float
    offline_after: int
    stats: LinkStats = field(default_factory=LinkStats)
    due: float = 0.0


class ModbusBus:
    """One client, one request on the wire at a time, one polling task."""

    def __init__(
        self,
        address: BusAddress,
        reports: ModbusReports | None = None,
        *,
        now: Callable[[], datetime],
        timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        log_interval: float = 60.0,
    ) -> None:
        self.address = address
        self._reports = reports
        self._now = now
        self._timeout = timeout
        self._clock = clock
        self._lock = asyncio.Lock()
        self._client: AsyncModbusSerialClient | AsyncModbusTcpClient | None = None
        self._received = 0
        self.devices: dict[str, BusDevice] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._problems = ThrottledLog(log, log_interval, clock)

    # Devices and lifecycle ---------------------------------------------------------------------

    def add(self, device_id: str, unit: int, codec: ModbusCodec) -> BusDevice:
        """Poll a device (replacing an earlier one of that id); its first poll is due now."""
        spec = codec.spec
        device = BusDevice(device_id, unit, codec, spec.poll_interval_s, spec.offline_after)
        device.due = self._clock()
        self.devices[device_id] = device
        self._wake.set()
        return device

    def remove(self, device_id: str) -> None:
        """Stop polling a device."""
        self.devices.pop(device_id, None)

    def start(self) -> None:
        """Start the polling task."""
        if self._task is None:
            self._task = asyncio.create_task(self._poll_loop(), name=f"modbus {self.address.key}")

    async def close(self) -> None:
        """Stop polling and close the port or connection."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        async with self._lock:
            client, self._client = self._client, None
            if client is not None:
                client.close()

    # Requests ----------------------------------------------------------------------------------

    def _new_client(self) -> AsyncModbusSerialClient | AsyncModbusTcpClient:
        # pymodbus is imported when a bus is first opened: most farms have no Modbus device,
        # and the import costs every agent about 1 MB of resident memory.
        from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient

        address = self.address
        common: dict[str, Any] = {
            "timeout": self._timeout,
            "retries": 0,
            # The bus reconnects on its next request; pymodbus's own reconnect loop stays off.
            "reconnect_delay": 0,
            "trace_packet": self._trace,
        }
        if address.port is not None:
            return AsyncModbusSerialClient(
                address.port,
                baudrate=address.baudrate,
                bytesize=address.bytesize,
                parity=address.parity,
                stopbits=address.stopbits,
                **common,
            )
        assert address.host is not None
        return AsyncModbusTcpClient(address.host, port=address.tcp_port, **common)

    def _trace(self, sending: bool, data: bytes) -> bytes:
        if not sending:
            self._received += len(data)
        return data

    async def _connected(self) -> AsyncModbusSerialClient | AsyncModbusTcpClient:
        if self._client is None:
            self._client = self._new_client()
        client = self._client
        if not client.connected and not await client.connect():
            client.close()
            self._client = None
            raise ModbusFailure("connection", f"{self.address.key}: cannot open the bus")
        return client

    async def exclusive(
        self, use: Callable[[AsyncModbusSerialClient | AsyncModbusTcpClient], Awaitable[Any]]
    ) -> Any:
        """Run ``use`` with the bus to itself (no other request on the wire meanwhile)."""
        async with self._lock:
            return await use(await self._connected())

    async def _call(self, request: Callable[[], Awaitable[Any]], what: str, timeout: float) -> Any:  # noqa: ASYNC109
        """One request (the lock is held); its answer, or ModbusFailure saying what went wrong."""
        from pymodbus.exceptions import ConnectionException, ModbusException, ModbusIOException

        before = self._received
        if self._client is not None:
            # pymodbus waits for an answer as long as its connect timeout (transaction.py:
            # wait_for(..., timeout=comm_params.timeout_connect)); set per request, as devices
            # on one bus (and a scan) may wait differently.
            self._client.comm_params.timeout_connect = timeout
        try:
            async with asyncio.timeout(timeout + 1.0):
                response = await request()
        except (ModbusIOException, TimeoutError) as err:
            if self._received != before:
                raise ModbusFailure("crc", f"{what}: answer rejected (bad CRC or framing)") from err
            raise ModbusFailure("timeout", f"{what}: no answer") from err
        except ConnectionException as err:
            client, self._client = self._client, None
            if client is not None:
                client.close()
            raise ModbusFailure("connection", f"{what}: {err}") from err
        except ModbusException as err:
            raise ModbusFailure("exception", f"{what}: {err}") from err
        if response.isError():
            code = getattr(response, "exception_code", "?")
            raise ModbusFailure("exception", f"{what}: device answered exception code {code}")
        return response

    async def read_block(
        self,
        unit: int,
        block: ReadBlock,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[int]:
        """Read one block from unit ``unit`` (the caller holds the bus: see ``read``)."""
        client = await self._connected()
        limit = timeout if timeout is not None else self._timeout
        what = f"unit {unit} {block.function} {block.address}+{block.count}"
        readers = {
            "input": client.read_input_registers,
            "holding": client.read_holding_registers,
            "coil": client.read_coils,
            "discrete": client.read_discrete_inputs,
        }
        read = readers[block.function]
        response = await self._call(
            lambda: read(block.address, count=block.count, device_id=unit), what, limit
        )
        if block.function in ("coil", "discrete"):
            return [int(bit) for bit in response.bits[: block.count]]
        registers = list(response.registers)
        if len(registers) < block.count:
            raise ModbusFailure("exception", f"{what}: answered {len(registers)} registers")
        return registers

    async def read(
        self,
        unit: int,
        blocks: Sequence[ReadBlock],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[ReadBlock, list[int]]:
        """Read ``blocks`` from one unit, holding the bus for all of them."""
        async with self._lock:
            return {block: await self.read_block(unit, block, timeout) for block in blocks}

    async def _write(self, unit: int, write: Write, timeout: float) -> None:  # noqa: ASYNC109
        client = await self._connected()
        what = f"unit {unit} write {write.function} {write.address}={write.value}"
        if write.function == "coil":
            await self._call(
                lambda: client.write_coil(write.address, bool(write.value), device_id=unit),
                what,
                timeout,
            )
        else:
            await self._call(
                lambda: client.write_register(write.address, write.value, device_id=unit),
                what,
                timeout,
            )

    # Polling -----------------------------------------------------------------------------------

    async def poll(self, device: BusDevice) -> Decoded | None:
        """Read a device's registers once and report the outcome; None when it failed."""
        device.stats.polls += 1
        try:
            answers = await self.read(device.unit, device.codec.blocks, device.codec.spec.timeout_s)
        except ModbusFailure as failure:
            await self._failed(device, failure)
            return None
        decoded = device.codec.decode(answers)
        device.stats.answered += 1
        device.stats.consecutive_failures = 0
        await self._set_online(device, True)
        received_at = self._now()
        for rejection in decoded.rejected:
            self._problems.warning(
                f"{rejection.reason}:{device.device_id}:{rejection.name}",
                "device %s: %s %s (%s)",
                device.device_id,
                rejection.name,
                rejection.reason.replace("_", " "),
                rejection.value,
            )
        if self._reports is not None and device.device_id in self.devices:
            if decoded.states:
                await self._reports.states(device.device_id, decoded.states, received_at)
            if decoded.measurements:
                await self._reports.measurements(
                    device.device_id, decoded.measurements, received_at
                )
        return decoded

    async def _failed(self, device: BusDevice, failure: ModbusFailure) -> None:
        stats = device.stats
        stats.count(failure)
        stats.consecutive_failures += 1
        self._problems.warning(
            f"{failure.kind}:{device.device_id}", "device %s: %s", device.device_id, failure
        )
        if stats.consecutive_failures == 1 and self._reports is not None:
            await self._reports.modbus_fault(device.device_id, str(failure))
        if stats.consecutive_failures >= device.offline_after:
            await self._set_online(device, False)

    async def _set_online(self, device: BusDevice, online: bool) -> None:
        if device.stats.online is online:
            return
        device.stats.online = online
        if self._reports is not None and device.device_id in self.devices:
            await self._reports.modbus_availability(device.device_id, online)

    async def _poll_loop(self) -> None:
        while True:
            if not self.devices:
                self._wake.clear()
                await self._wake.wait()
                continue
            device = min(self.devices.values(), key=lambda d: d.due)
            delay = device.due - self._clock()
            if delay > 0:
                self._wake.clear()
                # A device added meanwhile (due at once) wakes the loop early.
                try:
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            try:
                await self.poll(device)
            except Exception:  # a bug or a failing report must not end polling for good
                self._problems.exception(f"poll:{device.device_id}", "modbus poll failed")
            # The next poll keeps the pace; a bus that fell behind does not try to catch up.
            device.due = max(device.due + device.interval, self._clock())

    # Commands ----------------------------------------------------------------------------------

    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult:  # noqa: ASYNC109
        """Write a command and read the state back until it shows the command or ``timeout``.

        Raises KeyError for a device not on this bus, ValueError if its firmware has no such
        command, DeviceUnavailable when the writes get no answer.
        """
        device = self.devices[device_id]
        writes = device.codec.writes(command)
        expected = device.codec.expected_state(command)
        try:
            async with self._lock:
                for write in writes:
                    await self._write(device.unit, write, device.codec.spec.timeout_s)
        except ModbusFailure as failure:
            device.stats.count(failure)
            raise DeviceUnavailable(f"device {device_id}: {failure}") from failure
        if not expected:
            return CommandResult("unconfirmed", expected, {}, "firmware reports no state")
        observed: dict[str, bool | int] = {}
        deadline = self._clock() + timeout
        while True:
            try:
                answers = await self.read(
                    device.unit, device.codec.state_blocks, device.codec.spec.timeout_s
                )
                decoded = device.codec.decode(answers)
                observed.update({state.field: state.value for state in decoded.states})
                if self._reports is not None and decoded.states:
                    await self._reports.states(device_id, decoded.states, self._now())
            except ModbusFailure as failure:
                device.stats.count(failure)
            if all(observed.get(key) == value for key, value in expected.items()):
                return CommandResult("confirmed", expected, dict(observed))
            if self._clock() >= deadline:
                return CommandResult("timed_out", expected, dict(observed))
            # A drive takes a moment to apply a setpoint: ask again shortly, within the timeout.
            await asyncio.sleep(min(0.2, max(0.0, deadline - self._clock())))
