"""Atlas Scientific EZO pH and EC circuits in UART mode, driven by their firmware profiles.

Sources: "EZO-pH Embedded pH Circuit" and "EZO-EC Embedded Conductivity Circuit" datasheets
(Atlas Scientific), chapters "UART mode" (settings, command quick reference, response codes) and
the per-command pages cited below. UART defaults there: 9600 baud, 8 data bits, no parity, 1 stop
bit; every command and every reply line ends with <CR>. The command strings, port settings and
reading layout come from agent/firmware_profiles/atlas-ezo-*.toml through SerialCodec; this
module adds the request/reply conversation (initialisation, queries and their answers).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from agent.devices.codec import Decoded, SerialCodec
from agent.devices.errors import DeviceError, PayloadError
from agent.devices.profiles import FirmwareProfile, SerialSpec, render
from agent.devices.serial_port import LineFraming, Reply, SerialPort, SerialSettings
from farmkit.backoff import Backoff

__all__ = [
    "EzoCircuit",
    "EzoEc",
    "EzoInfo",
    "EzoPh",
    "EzoStatus",
    "EzoTimeouts",
    "PhSlope",
    "ezo_framing",
    "ezo_port",
    "ezo_serial_settings",
    "parse_calibration_points",
    "parse_slope",
]

logger = logging.getLogger(__name__)

# Datasheet, UART mode, "Response codes".
_RESPONSE_CODES = {
    "*OK": "command accepted",
    "*ER": "unknown command or invalid argument",
    "*OV": "supply over-voltage (VCC >= 5.5 V)",
    "*UV": "supply under-voltage (VCC <= 3.1 V)",
    "*RS": "reset",
    "*RE": "boot-up complete, ready",
    "*SL": "entering sleep mode",
    "*WA": "woken up",
}

# Datasheet, "Status" command: the first field is the reason for the last restart.
_RESTART_REASONS = {
    "P": "powered off",
    "S": "software reset",
    "B": "brown out",
    "W": "watchdog",
    "U": "unknown",
}

# Datasheet command names, used where a profile's [serial.commands] table leaves one out.
_DEFAULT_QUERIES = {
    "info": "i",
    "status": "Status",
    "temperature_query": "T,?",
    "slope_query": "Slope,?",
    "probe_k": "K,{value}",
    "probe_k_query": "K,?",
}


def ezo_serial_settings(url: str, serial: SerialSpec) -> SerialSettings:
    """Port settings for a device at `url` from its profile's [serial] table."""
    return SerialSettings(
        url=url,
        baudrate=serial.baudrate,
        bytesize=serial.bytesize,
        parity=serial.parity,
        stopbits=serial.stopbits,
        terminator=serial.terminator.encode(serial.encoding),
        encoding=serial.encoding,
    )


def ezo_framing(serial: SerialSpec) -> LineFraming:
    """Reply framing from the profile: its ok line, its error line and its event lines."""
    return LineFraming(
        ok_lines=frozenset({serial.ok_response}),
        error_lines={serial.error_response: _RESPONSE_CODES.get(serial.error_response, "error")},
        ignore_lines=frozenset(serial.events) - {serial.ok_response, serial.error_response},
    )


def ezo_port(
    url: str,
    profile: FirmwareProfile,
    *,
    backoff: Backoff | None = None,
    settle: float = 0.5,
    rng: random.Random | None = None,
    on_availability: Callable[[bool], None] | None = None,
) -> SerialPort:
    """A SerialPort for an EZO circuit at `url` described by `profile` (not yet started)."""
    if profile.serial is None:
        raise ValueError(f"profile {profile.id} is not a serial profile")
    return SerialPort(
        ezo_serial_settings(url, profile.serial),
        ezo_framing(profile.serial),
        backoff=backoff,
        settle=settle,
        rng=rng,
        on_availability=on_availability,
    )


@dataclass(frozen=True)
class EzoTimeouts:
    """Reply deadlines in seconds: the reply timeout plus the device's processing delay."""

    query: float = 3.0
    read: float = 3.9
    calibrate: float = 3.9

    @classmethod
    def from_profile(cls, profile: FirmwareProfile) -> EzoTimeouts:
        """Deadlines from `response_timeout_s`, `read_delay_s` and `processing_delay_s`."""
        assert profile.serial is not None
        base = profile.serial.response_timeout_s
        processing = profile.calibration.processing_delay_s if profile.calibration else 0.0
        return cls(query=base, read=base + profile.serial.read_delay_s, calibrate=base + processing)


@dataclass(frozen=True)
class EzoInfo:
    """Answer to `i`: device type and firmware version (datasheet, "i" command)."""

    device_type: str
    firmware: str


@dataclass(frozen=True)
class EzoStatus:
    """Answer to `Status`: why the device last restarted and its supply voltage."""

    restart_reason: str
    voltage: float


@dataclass(frozen=True)
class PhSlope:
    """Answer to `Slope,?` (datasheet pH, "Slope" command).

    Acid and base slopes are the probe's response as a percentage of the ideal Nernst slope;
    the offset (firmware 2.x and later) is the zero-point offset in millivolts.
    """

    acid_percent: float
    base_percent: float
    offset_mv: float | None


def _number(reply: Reply, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PayloadError(f"{reply.command!r}: expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise PayloadError(f"{reply.command!r}: non-finite number {text!r}")
    return value


def _query_fields(reply: Reply, prefix: str) -> list[str]:
    """Fields after `prefix` (e.g. `?CAL,`) in a query reply, matched case-insensitively."""
    wanted = prefix.lower()
    # Search from the end: a continuous reading emitted just before the reply may precede it.
    for line in reversed(reply.lines):
        if line.lower().startswith(wanted):
            return line[len(prefix) :].split(",")
    raise PayloadError(f"{reply.command!r}: no {prefix} line in reply {reply.raw!r}")


def parse_calibration_points(reply: Reply, prefix: str = "?CAL,") -> int:
    """Number of calibration points in a `Cal,?` reply (`?CAL,2` -> 2)."""
    parts = _query_fields(reply, prefix)
    try:
        return int(parts[0])
    except ValueError:
        raise PayloadError(f"{reply.command!r}: expected a count, got {reply.raw!r}") from None


def parse_slope(reply: Reply) -> PhSlope:
    """The probe slope in a `Slope,?` reply (`?Slope,99.7,100.3,-0.89`)."""
    parts = _query_fields(reply, "?Slope,")
    if len(parts) not in (2, 3):
        raise PayloadError(f"Slope,?: expected 2 or 3 fields, got {reply.raw!r}")
    # Firmware before 2.x answers only acid and base percentages, without the offset.
    offset = _number(reply, parts[2]) if len(parts) == 3 else None
    return PhSlope(_number(reply, parts[0]), _number(reply, parts[1]), offset)


class EzoCircuit:
    """Commands common to EZO circuits (datasheet, UART "Command quick reference")."""

    device_type = ""

    def __init__(
        self,
        port: SerialPort,
        profile: FirmwareProfile,
        timeouts: EzoTimeouts | None = None,
    ) -> None:
        if profile.serial is None or profile.calibration is None:
            raise ValueError(f"profile {profile.id} lacks [serial] or [calibration]")
        self.port = port
        self.profile = profile
        self.codec = SerialCodec(profile)
        self.timeouts = timeouts or EzoTimeouts.from_profile(profile)
        self._serial = profile.serial
        self._calibration = profile.calibration
        self._init_lock = asyncio.Lock()
        self._initialised_generation = -1
        self.info_cache: EzoInfo | None = None

    def query_command(self, name: str) -> str:
        """A query command from the profile's [serial.commands], else the datasheet's."""
        return self._serial.commands.get(name) or _DEFAULT_QUERIES[name]

    @property
    def calibration_query(self) -> str:
        """The command that asks how many calibration points the device holds."""
        return self._calibration.query_command or "Cal,?"

    @property
    def calibration_prefix(self) -> str:
        """The prefix of the answer to `calibration_query`."""
        return self._calibration.query_prefix or "?CAL,"

    async def send(self, command: str, timeout: float) -> Reply:  # noqa: ASYNC109
        """Send a raw command after making sure the device is initialised."""
        await self._ensure_initialised()
        return await self.port.command(command, timeout)

    async def read(self) -> Decoded:
        """One reading decoded into the profile's metrics (`R`; datasheet, "R" command)."""
        reply = await self.send(self.codec.read_command, self.timeouts.read)
        if not reply.lines:
            raise PayloadError(f"{reply.command!r}: no reading in reply {reply.raw!r}")
        return self.codec.decode_line(reply.value)

    async def read_metric(self, metric: str) -> float:
        """The value of one metric from a fresh reading (PayloadError if it was rejected)."""
        decoded = await self.read()
        for measurement in decoded.measurements:
            if measurement.metric == metric:
                return measurement.value
        reasons = [f"{r.name}: {r.reason}" for r in decoded.rejected]
        raise PayloadError(f"reading has no usable {metric!r} ({', '.join(reasons)})")

    async def info(self) -> EzoInfo:
        """Device type and firmware version (`i` -> `?i,pH,2.16`)."""
        reply = await self.send(self.query_command("info"), self.timeouts.query)
        return self._parse_info(reply)

    async def status(self) -> EzoStatus:
        """Restart reason and supply voltage (`Status` -> `?Status,P,5.038`)."""
        reply = await self.send(self.query_command("status"), self.timeouts.query)
        parts = _query_fields(reply, "?Status,")
        if len(parts) != 2:
            raise PayloadError(f"Status: expected reason and voltage, got {reply.raw!r}")
        reason = _RESTART_REASONS.get(parts[0].upper(), parts[0])
        return EzoStatus(restart_reason=reason, voltage=_number(reply, parts[1]))

    async def set_temperature(self, celsius: float) -> Reply:
        """Set the temperature used for compensation (`T,<celsius>`, datasheet "T" command)."""
        if not -5.0 <= celsius <= 100.0:
            raise ValueError(f"compensation temperature {celsius} degC outside -5..100")
        command = self.codec.temperature_command(celsius)
        return await self.send(command, self.timeouts.query)

    async def temperature(self) -> float:
        """The compensation temperature the device is using (`T,?` -> `?T,25.0`)."""
        reply = await self.send(self.query_command("temperature_query"), self.timeouts.query)
        return _number(reply, _query_fields(reply, "?T,")[0])

    async def calibration_points(self) -> int:
        """How many calibration points the device holds (`Cal,?` -> `?CAL,n`)."""
        reply = await self.send(self.calibration_query, self.timeouts.query)
        return parse_calibration_points(reply, self.calibration_prefix)

    async def clear_calibration(self) -> Reply:
        """Delete the device's calibration (`Cal,clear`)."""
        command = self._calibration.clear_command or "Cal,clear"
        return await self.send(command, self.timeouts.calibrate)

    async def calibrate(self, point: str, value: float | None = None) -> Reply:
        """Take calibration point `point` (mid, low, high, dry, single) at reference `value`."""
        command = self.codec.calibration_command(point, value)
        return await self.send(command, self.timeouts.calibrate)

    async def _ensure_initialised(self) -> None:
        if self._initialised_generation == self.port.generation:
            return
        async with self._init_lock:
            generation = self.port.generation
            if self._initialised_generation == generation:
                return
            for command in self._serial.init_commands:
                await self.port.command(command, self.timeouts.query)
            reply = await self.port.command(self.query_command("info"), self.timeouts.query)
            info = self._parse_info(reply)
            if self.device_type and info.device_type.lower() != self.device_type.lower():
                raise DeviceError(
                    f"{self.port.settings.url}: expected an EZO {self.device_type} circuit, "
                    f"found {info.device_type} (firmware {info.firmware})"
                )
            self.info_cache = info
            self._initialised_generation = generation
            url = self.port.settings.url
            logger.info("%s: EZO %s firmware %s ready", url, info.device_type, info.firmware)

    @staticmethod
    def _parse_info(reply: Reply) -> EzoInfo:
        parts = _query_fields(reply, "?i,")
        if len(parts) < 2:
            raise PayloadError(f"i: expected type and firmware, got {reply.raw!r}")
        return EzoInfo(device_type=parts[0], firmware=parts[1])


class EzoPh(EzoCircuit):
    """The EZO-pH circuit."""

    device_type = "pH"

    async def slope(self) -> PhSlope:
        """Probe slope after calibration (`Slope,?` -> `?Slope,99.7,100.3,-0.89`)."""
        reply = await self.send(self.query_command("slope_query"), self.timeouts.query)
        return parse_slope(reply)


class EzoEc(EzoCircuit):
    """The EZO-EC circuit."""

    device_type = "EC"

    async def set_probe_k(self, k: float) -> Reply:
        """Set the probe's cell constant (`K,<k>`; datasheet EC, "K" command: 0.1 .. 10)."""
        if not 0.1 <= k <= 10.0:
            raise ValueError(f"probe K {k} outside 0.1..10")
        command = render(self.query_command("probe_k"), {"value": f"{k:g}"})
        return await self.send(command, self.timeouts.query)

    async def probe_k(self) -> float:
        """The probe cell constant the device is using (`K,?` -> `?K,1.0`)."""
        reply = await self.send(self.query_command("probe_k_query"), self.timeouts.query)
        return _number(reply, _query_fields(reply, "?K,")[0])
