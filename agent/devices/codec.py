"""Decode device messages and encode device commands with a firmware profile.

``DeviceCodec`` binds an MQTT profile to one device's topic base and turns its messages into
measurements, state reports and availability, and commands into MQTT messages. ``SerialCodec``
does the same for serial (EZO) readings and command strings. Neither does I/O.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from agent.devices.errors import PayloadError
from agent.devices.profiles import (
    SWITCH_FIELDS,
    UNIT_CONVERSIONS,
    CommandKind,
    FirmwareProfile,
    MessageSpec,
    MetricSpec,
    RejectReason,
    StateSpec,
    render,
)
from protocol.records import record

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "Command",
    "Decoded",
    "DeviceCodec",
    "Measurement",
    "OutgoingMessage",
    "Rejection",
    "SerialCodec",
    "StateUpdate",
    "level_to_percent",
    "percent_to_level",
]

#: Larger payloads are refused unread: no sensor firmware sends more, and JSON parsing is O(n).
MAX_PAYLOAD_BYTES = 64 * 1024
#: Device clocks before this are unset (Tasmota reports 1970 until NTP syncs); use receive time.
_EARLIEST_DEVICE_TIME = datetime(2001, 1, 1, tzinfo=UTC)


@record
class Measurement:
    """One decoded reading in the metric's canonical unit."""

    metric: str
    value: float
    unit: str
    device_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class StateUpdate:
    """One reported piece of device state: on/off, or a 0-100 % level."""

    field: str
    value: bool | int


@dataclass(frozen=True, slots=True)
class Rejection:
    """A metric or state value that was present in a payload but not usable."""

    name: str
    reason: RejectReason
    value: str = ""


@record
class Decoded:
    """Everything one message said; empty tuples when it said nothing relevant."""

    measurements: tuple[Measurement, ...] = ()
    states: tuple[StateUpdate, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    online: bool | None = None
    command_error: str | None = None


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """An MQTT message to publish."""

    topic: str
    payload: str
    qos: int
    retain: bool


@dataclass(frozen=True, slots=True)
class Command:
    """A device command: ``power``/``valve`` take a bool, ``fan_speed``/``brightness`` 0-100 %."""

    kind: CommandKind
    value: bool | int

    def __post_init__(self) -> None:
        if self.kind in SWITCH_FIELDS:
            if not isinstance(self.value, bool):
                raise ValueError(f"{self.kind} takes true or false")
        elif isinstance(self.value, bool) or not 0 <= self.value <= 100:
            raise ValueError(f"{self.kind} takes a percentage 0-100")


def percent_to_level(percent: int, levels: int) -> int:
    """Map 0-100 % onto device levels 0..levels; any non-zero percentage is at least level 1."""
    if percent <= 0:
        return 0
    return max(1, min(levels, math.floor(percent * levels / 100 + 0.5)))


def level_to_percent(level: int, levels: int) -> int:
    """Map a device level 0..levels back to a whole percentage; a running device is >= 1 %."""
    if level <= 0:
        return 0
    return max(1, math.floor(level * 100 / levels + 0.5))


class DeviceCodec:
    """A firmware profile bound to one MQTT device's topic base (and variable overrides)."""

    def __init__(
        self,
        profile: FirmwareProfile,
        base: str,
        variables: Mapping[str, str] | None = None,
    ) -> None:
        if profile.transport != "mqtt":
            raise ValueError(f"profile {profile.id} is not an MQTT profile")
        if not base or any(char in base for char in "+#\0"):
            raise ValueError(f"invalid topic base {base!r}")
        unknown = set(variables or {}) - set(profile.variables)
        if unknown:
            raise ValueError(f"profile {profile.id} has no variables {sorted(unknown)}")
        self.profile = profile
        self.values: dict[str, str] = {**profile.variables, **(variables or {}), "base": base}
        self._messages: dict[str, list[MessageSpec]] = {}
        for message in profile.messages:
            self._messages.setdefault(self.topic(message.topic), []).append(message)
        availability = profile.availability
        self.status_topic = (
            self.topic(availability.topic)
            if availability is not None and availability.topic is not None
            else None
        )

    def topic(self, template: str) -> str:
        """Render a topic template for this device."""
        return render(template, self.values)

    def subscriptions(self) -> tuple[str, ...]:
        """The topics to subscribe to for this device."""
        topics = list(self._messages)
        if self.status_topic is not None:
            topics.append(self.status_topic)
        return tuple(topics)

    def state_topics(self) -> frozenset[str]:
        """The topics on which the device reports its state or a refused command: what
        confirms or rejects a command sent to it."""
        return frozenset(
            topic
            for topic, specs in self._messages.items()
            if any(spec.states or spec.error_path for spec in specs)
        )

    def decode(self, topic: str, payload: bytes, device_tz: tzinfo | None = None) -> Decoded:
        """Decode one message; raise PayloadError if the payload as a whole is unusable.

        ``device_tz`` interprets device timestamps without an offset (Tasmota's local ``Time``);
        without it such timestamps are dropped and the caller uses its receive time.
        """
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise PayloadError(f"payload of {len(payload)} bytes is too large")
        text = _text(payload)
        if topic == self.status_topic:
            return Decoded(online=self._decode_status(text))
        specs = self._messages.get(topic)
        if specs is None:
            raise PayloadError(f"topic {topic!r} does not belong to this device")
        parts = [_decode_message(spec, text, device_tz) for spec in specs]
        if len(parts) == 1:
            return parts[0]
        return Decoded(
            measurements=tuple(m for part in parts for m in part.measurements),
            states=tuple(s for part in parts for s in part.states),
            rejected=tuple(r for part in parts for r in part.rejected),
            command_error=next((p.command_error for p in parts if p.command_error), None),
        )

    def _decode_status(self, text: str) -> bool:
        spec = self.profile.availability
        assert spec is not None
        value = text.strip()
        if spec.path is not None:
            # A JSON status ({"state": "online"}); the plain token is still understood.
            with contextlib.suppress(json.JSONDecodeError, RecursionError):
                document = _JSON.decode(value)
                if isinstance(document, dict):
                    found, token = _lookup(document, (spec.path,))
                    value = str(token).strip() if found else ""
        if value.casefold() == spec.online.casefold():
            return True
        if value.casefold() == spec.offline.casefold():
            return False
        raise PayloadError(f"status payload {_excerpt(value)} is neither online nor offline")

    def supports(self, kind: str) -> bool:
        """True if the profile can encode this command kind."""
        return kind in self.profile.commands

    def encode(self, command: Command) -> tuple[OutgoingMessage, ...]:
        """Encode a command as the MQTT messages the firmware expects, in order."""
        spec = self.profile.commands.get(command.kind)
        if spec is None:
            raise ValueError(f"profile {self.profile.id} has no {command.kind} command")
        values = dict(self.values)
        if command.kind in SWITCH_FIELDS:
            turning_on = bool(command.value)
            values["switch"] = spec.on if turning_on else spec.off
        else:
            percent = int(command.value)
            level = percent_to_level(percent, spec.levels) if spec.levels else percent
            turning_on = level > 0
            values["percent"] = str(percent)
            values["level"] = str(level)
        wanted = "on" if turning_on else "off"
        return tuple(
            OutgoingMessage(
                topic=render(message.topic, values),
                payload=render(message.payload, values),
                qos=spec.qos,
                retain=spec.retain,
            )
            for message in spec.messages
            if message.when in ("always", wanted)
        )

    def expected_state(self, command: Command) -> dict[str, bool | int]:
        """The state report that confirms a command (only fields the firmware reports)."""
        reported = self.profile.state_fields
        expected: dict[str, bool | int]
        if command.kind in SWITCH_FIELDS:
            expected = {command.kind: bool(command.value)}
        else:
            spec = self.profile.commands[command.kind]
            percent = int(command.value)
            if spec.levels:
                percent = level_to_percent(percent_to_level(percent, spec.levels), spec.levels)
            if spec.zero_turns_off and percent == 0:
                expected = {"power": False}
            elif spec.zero_turns_off:
                expected = {command.kind: percent, "power": True}
            else:
                expected = {command.kind: percent}
        return {key: value for key, value in expected.items() if key in reported}


class SerialCodec:
    """A serial (EZO) profile: reading lines to measurements, commands to command strings."""

    def __init__(self, profile: FirmwareProfile) -> None:
        if profile.serial is None:
            raise ValueError(f"profile {profile.id} is not a serial profile")
        self.profile = profile
        self.serial = profile.serial

    def decode_line(self, line: str) -> Decoded:
        """Decode a reading line (terminator already stripped or not); PayloadError if unusable."""
        text = line.strip().strip(self.serial.terminator).strip()
        if not text or text[0] in "*?":
            raise PayloadError(f"{_excerpt(text)} is not a reading")
        fields = text.split(self.serial.field_separator)
        measurements: list[Measurement] = []
        rejected: list[Rejection] = []
        numeric = 0
        for metric in self.serial.metrics:
            assert metric.index is not None
            if metric.index >= len(fields):
                if not metric.optional:
                    rejected.append(Rejection(metric.name, "missing"))
                continue
            raw: Any = fields[metric.index].strip()
            value = _number(raw)
            if not isinstance(value, str):
                numeric += 1
            outcome = _measure(metric, value, raw, None, None)
            if isinstance(outcome, Measurement):
                measurements.append(outcome)
            else:
                rejected.append(outcome)
        if numeric == 0:
            raise PayloadError(f"{_excerpt(text)} holds no number")
        return Decoded(measurements=tuple(measurements), rejected=tuple(rejected))

    @property
    def read_command(self) -> str:
        """The command that requests one reading (EZO ``R``)."""
        return self.serial.read_command

    def calibration_command(self, point: str, value: float | None = None) -> str:
        """The command string for one calibration point, e.g. ``Cal,mid,7.00``."""
        calibration = self.profile.calibration
        if calibration is None or calibration.performed_by != "device":
            raise ValueError(f"profile {self.profile.id} has no on-device calibration")
        spec = calibration.point(point)
        if not spec.takes_value:
            return spec.command
        reference = spec.default if value is None else value
        if reference is None or not math.isfinite(reference):
            raise ValueError(f"calibration point {point} needs a reference value")
        if (spec.min is not None and reference < spec.min) or (
            spec.max is not None and reference > spec.max
        ):
            raise ValueError(f"{reference} is outside {spec.min}..{spec.max} for point {point}")
        return render(spec.command, {"value": f"{reference:.{spec.decimals}f}"})

    def temperature_command(self, celsius: float) -> str:
        """The temperature-compensation command, e.g. ``T,25.0``."""
        template = self.serial.temperature_command
        if template is None:
            raise ValueError(f"profile {self.profile.id} has no temperature compensation")
        if not math.isfinite(celsius):
            raise ValueError("temperature must be a finite number")
        return render(template, {"value": f"{celsius:.{self.serial.temperature_decimals}f}"})


def _text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PayloadError(f"payload is not UTF-8 ({err.reason})") from err


def _excerpt(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _nan_constant(_: str) -> float:
    return math.nan


# One decoder for every message: ``json.loads`` with an argument builds a new one per call.
# NaN/Infinity are not JSON, but some firmwares send them: they decode as "no number".
_JSON = json.JSONDecoder(parse_constant=_nan_constant)


def _decode_message(spec: MessageSpec, text: str, device_tz: tzinfo | None) -> Decoded:
    if spec.format == "plain":
        return _decode_plain(spec, text)
    try:
        document = _JSON.decode(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise PayloadError(f"invalid JSON ({err})") from err
    if not isinstance(document, dict):
        raise PayloadError(f"expected a JSON object, got {type(document).__name__}")
    if spec.error_path is not None:
        found, error = _lookup(document, (spec.error_path,))
        if found and isinstance(error, str) and error in spec.error_values:
            return Decoded(command_error=error)
    device_time = _device_time(spec, document, device_tz)
    measurements: list[Measurement] = []
    rejected: list[Rejection] = []
    for metric in spec.metrics:
        found, raw = _lookup(document, metric.path)
        if not found:
            if not metric.optional:
                rejected.append(Rejection(metric.name, "missing"))
            continue
        unit = _reported_unit(metric, document)
        outcome = _measure(metric, _number(raw), raw, unit, device_time)
        if isinstance(outcome, Measurement):
            measurements.append(outcome)
        else:
            rejected.append(outcome)
    states: list[StateUpdate] = []
    for state in spec.states:
        found, raw = _lookup(document, state.path)
        if found:
            outcome_state = _state(state, raw)
            if isinstance(outcome_state, StateUpdate):
                states.append(outcome_state)
            else:
                rejected.append(outcome_state)
    return Decoded(tuple(measurements), tuple(states), tuple(rejected))


def _decode_plain(spec: MessageSpec, text: str) -> Decoded:
    value = text.strip()
    if spec.metrics:
        metric = spec.metrics[0]
        number = _number(value)
        if isinstance(number, str):
            raise PayloadError(f"{_excerpt(value)} is not a number")
        outcome = _measure(metric, number, value, None, None)
        if isinstance(outcome, Measurement):
            return Decoded(measurements=(outcome,))
        return Decoded(rejected=(outcome,))
    result = _state(spec.states[0], value)
    if isinstance(result, Rejection):
        raise PayloadError(f"{_excerpt(value)} is not a valid {spec.states[0].field} state")
    return Decoded(states=(result,))


def _lookup(document: Any, paths: tuple[str, ...]) -> tuple[bool, Any]:
    """Follow the first dotted path that exists; integer segments index lists."""
    for path in paths:
        node = document
        for key in path.split("."):
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                break
        else:
            return True, node
    return False, None


def _number(raw: Any) -> float | str:
    """A float (NaN for null/NaN), or the string ``"malformed"`` when it is not a number."""
    if raw is None:
        return math.nan
    if isinstance(raw, bool):
        return "malformed"
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            return "malformed"
    return "malformed"


def _reported_unit(metric: MetricSpec, document: Any) -> str | None:
    if metric.unit_path is None:
        return None
    found, token = _lookup(document, (metric.unit_path,))
    if not found:
        return metric.unit
    return metric.unit_values.get(str(token), f"?{token}")


def _measure(
    metric: MetricSpec,
    number: float | str,
    raw: Any,
    unit: str | None,
    device_time: datetime | None,
) -> Measurement | Rejection:
    if isinstance(number, str):
        return Rejection(metric.name, "malformed", _excerpt(raw))
    if not math.isfinite(number):
        return Rejection(metric.name, "not_a_number", _excerpt(raw))
    value = number * metric.scale + metric.offset
    if unit is not None and unit != metric.unit:
        convert: Callable[[float], float] | None = UNIT_CONVERSIONS.get((unit, metric.unit))
        if convert is None:
            return Rejection(metric.name, "malformed", f"unit {unit}")
        value = convert(value)
    if not metric.min <= value <= metric.max:
        return Rejection(metric.name, "out_of_range", _excerpt(raw))
    return Measurement(metric.name, value, metric.unit, device_time)


def _state(spec: StateSpec, raw: Any) -> StateUpdate | Rejection:
    if spec.field in SWITCH_FIELDS:
        # A JSON boolean (Shelly's "output": true) reads as the token true/false.
        if isinstance(raw, bool):
            raw = "true" if raw else "false"
        token = str(raw).strip().casefold() if isinstance(raw, str) else None
        if token == spec.on.casefold():
            return StateUpdate(spec.field, True)
        if token == spec.off.casefold():
            return StateUpdate(spec.field, False)
        return Rejection(spec.field, "malformed", _excerpt(raw))
    number = _number(raw)
    if isinstance(number, str) or not math.isfinite(number) or number != int(number):
        return Rejection(spec.field, "malformed", _excerpt(raw))
    level = int(number)
    top = spec.levels or 100
    if not 0 <= level <= top:
        return Rejection(spec.field, "out_of_range", _excerpt(raw))
    return StateUpdate(spec.field, level_to_percent(level, spec.levels) if spec.levels else level)


def _device_time(spec: MessageSpec, document: Any, device_tz: tzinfo | None) -> datetime | None:
    if spec.time_path is None:
        return None
    found, raw = _lookup(document, (spec.time_path,))
    if not found:
        return None
    moment: datetime | None = None
    try:
        if spec.time_format == "iso8601" and isinstance(raw, str):
            moment = datetime.fromisoformat(raw)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=device_tz) if device_tz is not None else None
        elif spec.time_format != "iso8601" and isinstance(raw, int | float):
            seconds = raw / 1000 if spec.time_format == "epoch_ms" else raw
            moment = datetime.fromtimestamp(seconds, UTC)
    except (ValueError, OverflowError, OSError):
        return None
    if moment is None or moment < _EARLIEST_DEVICE_TIME:
        return None
    return moment.astimezone(UTC)
