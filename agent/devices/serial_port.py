"""Line-oriented serial port: one command in flight, supervised reopen after unplug.

The port never blocks the event loop: pyserial-asyncio-fast opens the device in an executor and
reads it through the loop's reader callbacks. A supervisor task keeps the port open, reopening it
with jittered exponential back-off when the device disappears (USB unplug, power cycle).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import serial
import serial_asyncio_fast

from agent.devices.errors import DeviceRejected, DeviceTimeout, DeviceUnavailable
from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait

__all__ = [
    "LineFraming",
    "Reply",
    "ReplyRejected",
    "SerialPort",
    "SerialSettings",
]

logger = logging.getLogger(__name__)

_OPEN_ERRORS = (serial.SerialException, OSError, ValueError, TimeoutError)
# Jittered (farmkit/backoff.py): ports that lost power together do not hammer the USB hub in step.
_REOPEN_BACKOFF = Backoff(initial=0.5, maximum=30.0)


@dataclass(frozen=True)
class SerialSettings:
    """Where the device is and how its UART is configured."""

    url: str
    baudrate: int = 9600
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    terminator: bytes = b"\r"
    encoding: str = "ascii"


@dataclass(frozen=True)
class LineFraming:
    """How a device ends a reply: which lines are status codes and which are data.

    With `ok_lines` empty the first data line completes the reply (devices without an
    acknowledgement); otherwise data lines are collected until an ok or error line arrives.
    """

    ok_lines: frozenset[str] = frozenset()
    error_lines: Mapping[str, str] = field(default_factory=dict)
    ignore_lines: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Reply:
    """A device's complete reply to one command."""

    command: str
    lines: tuple[str, ...]
    status: str | None

    @property
    def value(self) -> str:
        """The last data line, or "" when the device only acknowledged."""
        return self.lines[-1] if self.lines else ""

    @property
    def raw(self) -> tuple[str, ...]:
        """Every line the device sent, status included, as received."""
        return self.lines if self.status is None else (*self.lines, self.status)


class ReplyRejected(DeviceRejected):
    """The device answered a command with an error status line."""

    def __init__(self, reply: Reply, meaning: str) -> None:
        super().__init__(f"{reply.command!r} rejected by device: {reply.status} ({meaning})")
        self.reply = reply
        self.meaning = meaning


class _LineProtocol(asyncio.Protocol):
    """Splits received bytes into lines and hands them to one waiting reader."""

    def __init__(self, settings: SerialSettings) -> None:
        self._settings = settings
        self._buffer = bytearray()
        self._lines: deque[str] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.made: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.made.done():
            self.made.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._buffer.extend(data)
        terminator = self._settings.terminator
        while (end := self._buffer.find(terminator)) >= 0:
            raw = bytes(self._buffer[:end])
            del self._buffer[: end + len(terminator)]
            line = raw.decode(self._settings.encoding, errors="replace").strip()
            if line:
                self._lines.append(line)
        if self._lines:
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def discard(self) -> int:
        """Drop unsolicited lines and any partial line; return how many lines were dropped."""
        dropped = len(self._lines)
        self._lines.clear()
        self._buffer.clear()
        return dropped

    async def next_line(self) -> str:
        """Wait for the next line; raise DeviceUnavailable once the port is gone."""
        while not self._lines:
            if self.lost.done():
                raise DeviceUnavailable(f"serial port {self._settings.url} closed")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._lines.popleft()


class SerialPort:
    """A serial device speaking a command/reply line protocol, kept open by a supervisor."""

    def __init__(
        self,
        settings: SerialSettings,
        framing: LineFraming,
        *,
        backoff: Backoff | None = None,
        open_timeout: float = 5.0,
        settle: float = 0.5,
        rng: random.Random | None = None,
        on_availability: Callable[[bool], None] | None = None,
    ) -> None:
        self.settings = settings
        self._framing = framing
        self._backoff = backoff or _REOPEN_BACKOFF
        self._open_timeout = open_timeout
        # After a timeout the device may still answer the abandoned command; wait this long and
        # drop what arrives so the late answer is not taken as the next command's reply.
        self._settle = settle
        self._rng = rng or random.Random()
        self._on_availability = on_availability
        self._lock = asyncio.Lock()
        self._connected = asyncio.Event()
        self._protocol: _LineProtocol | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._generation = 0
        self._resync = False

    @property
    def connected(self) -> bool:
        """Whether the port is open right now."""
        return self._protocol is not None

    @property
    def generation(self) -> int:
        """How many times the port has been opened; changes after every reopen."""
        return self._generation

    async def start(self) -> None:
        """Start the supervisor that opens the port and reopens it after loss."""
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(
                self._supervise(), name=f"serial-port {self.settings.url}"
            )

    async def close(self) -> None:
        """Stop the supervisor and close the port."""
        task, self._supervisor = self._supervisor, None
        await cancel_and_wait(task)

    async def __aenter__(self) -> SerialPort:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def wait_connected(self, within: float) -> None:
        """Wait until the port is open; DeviceUnavailable if it is not open `within` seconds."""
        try:
            async with asyncio.timeout(within):
                await self._connected.wait()
        except TimeoutError:
            raise DeviceUnavailable(
                f"serial port {self.settings.url} not open after {within:g} s"
            ) from None

    # The deadline is part of the line protocol, not a generic wrapper: after it passes the port
    # must drain the abandoned reply before the next command, hence the parameter.
    async def command(self, text: str, timeout: float) -> Reply:  # noqa: ASYNC109
        """Send one command line and return the device's reply.

        Commands are serialized: a second caller waits until the first reply is complete, so the
        device never sees two commands at once. Raises DeviceUnavailable when the port is not
        open or is lost mid-command, DeviceTimeout when the reply is incomplete after `timeout`
        seconds, and ReplyRejected (a DeviceRejected) when the device answers with an error line.
        """
        async with self._lock:
            protocol = self._protocol
            if protocol is None or protocol.transport is None:
                raise DeviceUnavailable(f"serial port {self.settings.url} is not open")
            if self._resync:
                await self._drain_late_replies(protocol)
            dropped = protocol.discard()
            if dropped:
                logger.debug("%s: dropped %d unsolicited lines", self.settings.url, dropped)
            payload = text.encode(self.settings.encoding) + self.settings.terminator
            protocol.transport.write(payload)
            try:
                async with asyncio.timeout(timeout):
                    return await self._read_reply(protocol, text)
            except TimeoutError:
                self._resync = True
                raise DeviceTimeout(
                    f"{text!r} on {self.settings.url}: no complete reply within {timeout:g} s"
                ) from None
            except asyncio.CancelledError:
                self._resync = True
                raise

    async def _read_reply(self, protocol: _LineProtocol, text: str) -> Reply:
        framing = self._framing
        lines: list[str] = []
        while True:
            line = await protocol.next_line()
            if line in framing.ignore_lines:
                logger.info("%s: device said %s", self.settings.url, line)
                continue
            if line in framing.ok_lines:
                return Reply(text, tuple(lines), line)
            meaning = framing.error_lines.get(line)
            if meaning is not None:
                raise ReplyRejected(Reply(text, tuple(lines), line), meaning)
            lines.append(line)
            if not framing.ok_lines:
                return Reply(text, tuple(lines), None)

    async def _drain_late_replies(self, protocol: _LineProtocol) -> None:
        self._resync = False
        await asyncio.sleep(self._settle)
        dropped = protocol.discard()
        logger.debug("%s: dropped %d late lines after a timeout", self.settings.url, dropped)

    async def _supervise(self) -> None:
        failures = 0
        try:
            while True:
                try:
                    protocol = await self._open()
                except _OPEN_ERRORS as err:
                    delay = self._backoff.delay(failures, self._rng.random)
                    log = logger.warning if failures == 0 else logger.debug
                    log("%s: cannot open (%s); retrying in %.2f s", self.settings.url, err, delay)
                    failures += 1
                    await asyncio.sleep(delay)
                    continue
                failures = 0
                await self._serve(protocol)
                delay = self._backoff.delay(0, self._rng.random)
                logger.warning("%s: port lost; reopening in %.2f s", self.settings.url, delay)
                await asyncio.sleep(delay)
        finally:
            await self._drop()

    async def _open(self) -> _LineProtocol:
        s = self.settings
        loop = asyncio.get_running_loop()
        protocol = _LineProtocol(s)
        async with asyncio.timeout(self._open_timeout):
            await serial_asyncio_fast.create_serial_connection(
                loop,
                lambda: protocol,
                s.url,
                baudrate=s.baudrate,
                bytesize=s.bytesize,
                parity=s.parity,
                stopbits=s.stopbits,
                # flock the port so a second agent (or a stray `screen`) cannot share it.
                exclusive=True,
            )
            # connection_made is scheduled with call_soon; wait for it before using the transport.
            await protocol.made
        return protocol

    async def _serve(self, protocol: _LineProtocol) -> None:
        self._protocol = protocol
        self._generation += 1
        self._connected.set()
        logger.info("%s: open (generation %d)", self.settings.url, self._generation)
        self._notify(True)
        try:
            await protocol.lost
        finally:
            await self._drop()

    async def _drop(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is None:
            return
        self._connected.clear()
        self._notify(False)
        if protocol.transport is not None:
            protocol.transport.close()
        # Wait for pyserial-asyncio-fast to finish closing the fd in its executor job.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._open_timeout):
                await asyncio.shield(protocol.lost)

    def _notify(self, available: bool) -> None:
        if self._on_availability is None:
            return
        try:
            self._on_availability(available)
        except Exception:
            logger.exception("%s: availability callback failed", self.settings.url)
