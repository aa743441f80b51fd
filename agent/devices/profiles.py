"""Firmware profiles: devices described as data (agent/firmware_profiles/*.toml), checked at start.

A profile says how a firmware talks: its transport, the topics it publishes and how each payload
maps to metrics (unit, scale, valid range) or to device state, how commands are encoded, how
availability is signalled, and how the device is calibrated. Serial profiles (Atlas Scientific EZO)
carry the port settings and command strings instead of topics. Every profile ships golden payloads
that the test suite decodes. docs/firmware-profiles.md documents every field.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.devices.errors import ProfileError
from agent.devices.modbus_spec import ModbusSpec

__all__ = [
    "SWITCH_FIELDS",
    "UNIT_CONVERSIONS",
    "AvailabilitySpec",
    "CalibrationPoint",
    "CalibrationSpec",
    "CommandKind",
    "CommandMessage",
    "CommandSpec",
    "DeviceKind",
    "FirmwareProfile",
    "GoldenCommand",
    "GoldenMessage",
    "GoldenPayload",
    "MessageSpec",
    "MetricSpec",
    "ProfileRegistry",
    "RejectReason",
    "SerialSpec",
    "StateField",
    "StateSpec",
    "load_profile",
    "load_profiles",
    "placeholders",
    "render",
]

Transport = Literal["mqtt", "serial", "modbus"]
DeviceKind = Literal["sensor", "fan", "light", "pump", "valve", "relay"]
StateField = Literal["power", "fan_speed", "brightness", "valve"]
CommandKind = Literal["power", "fan_speed", "brightness", "valve"]
RejectReason = Literal["missing", "not_a_number", "out_of_range", "malformed"]

#: State fields and command kinds that are on/off; the others are 0-100 % levels.
SWITCH_FIELDS: frozenset[str] = frozenset({"power", "valve"})

Ident = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
Qos = Annotated[int, Field(ge=0, le=2)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Number = Annotated[float, Field(allow_inf_nan=False)]

#: Unit conversions a profile may ask for (reported unit, canonical unit) -> function.
UNIT_CONVERSIONS: Mapping[tuple[str, str], Callable[[float], float]] = {
    ("°F", "°C"): lambda value: (value - 32.0) * 5.0 / 9.0,
    ("K", "°C"): lambda value: value - 273.15,
    ("mS/cm", "µS/cm"): lambda value: value * 1000.0,
}

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def placeholders(template: str) -> set[str]:
    """Return the ``{name}`` placeholders used in a template."""
    return set(_PLACEHOLDER.findall(template))


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{name}`` placeholders; other braces (JSON payloads) are left alone."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        return values[name] if name in values else match.group(0)

    return _PLACEHOLDER.sub(substitute, template)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _paths(value: Any) -> Any:
    """Accept one dotted JSON path or a list of alternatives (first present wins)."""
    if isinstance(value, str):
        return (value,)
    return value


class MetricSpec(_Model):
    """One measured quantity in a payload: where it is, its unit, scale and valid range."""

    name: Ident
    unit: str = Field(min_length=1)
    path: tuple[str, ...] = ()
    index: int | None = Field(default=None, ge=0)
    scale: Number = 1.0
    offset: Number = 0.0
    min: Number
    max: Number
    unit_path: str | None = None
    unit_values: dict[str, str] = Field(default_factory=dict)
    optional: bool = False
    decimals: int = Field(default=1, ge=0, le=6)
    typical: Number | None = None

    _split_path = field_validator("path", mode="before")(_paths)

    @model_validator(mode="after")
    def _check(self) -> MetricSpec:
        if self.min >= self.max:
            raise ValueError(f"min ({self.min}) must be below max ({self.max})")
        if self.scale == 0:
            raise ValueError("scale must not be 0")
        if self.typical is not None and not self.min <= self.typical <= self.max:
            raise ValueError("typical must lie within min..max")
        for reported in self.unit_values.values():
            if reported != self.unit and (reported, self.unit) not in UNIT_CONVERSIONS:
                raise ValueError(f"no conversion from {reported!r} to {self.unit!r}")
        if self.unit_values and self.unit_path is None:
            raise ValueError("unit_values needs unit_path")
        return self


class StateSpec(_Model):
    """One piece of device state in a payload: on/off (power, valve) or a 0-100 % level."""

    field: StateField
    path: tuple[str, ...] = ()
    on: str = "ON"
    off: str = "OFF"
    levels: int | None = Field(default=None, ge=1, le=10000)

    _split_path = field_validator("path", mode="before")(_paths)

    @model_validator(mode="after")
    def _check(self) -> StateSpec:
        if self.field in SWITCH_FIELDS and self.levels is not None:
            raise ValueError(f"{self.field} is on/off and takes no levels")
        return self


class MessageSpec(_Model):
    """A topic the firmware publishes, and what its payload carries."""

    topic: str = Field(min_length=1)
    format: Literal["json", "plain"] = "json"
    qos: Qos = 0
    retain: bool = False
    interval_s: Seconds | None = None
    time_path: str | None = None
    time_format: Literal["iso8601", "epoch_s", "epoch_ms"] = "iso8601"
    metrics: tuple[MetricSpec, ...] = ()
    states: tuple[StateSpec, ...] = ()
    error_path: str | None = None
    error_values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> MessageSpec:
        if not self.metrics and not self.states:
            raise ValueError("a message needs metrics or states")
        items: tuple[MetricSpec | StateSpec, ...] = (*self.metrics, *self.states)
        if self.format == "plain":
            if len(items) != 1:
                raise ValueError("a plain message carries exactly one metric or state")
            if items[0].path or self.time_path or self.error_path:
                raise ValueError("a plain message has no JSON paths")
        else:
            for item in items:
                if not item.path:
                    name = item.name if isinstance(item, MetricSpec) else item.field
                    raise ValueError(f"{name}: a JSON message needs a path for each item")
        if any(metric.index is not None for metric in self.metrics):
            raise ValueError("index is for serial readings only")
        if bool(self.error_path) != bool(self.error_values):
            raise ValueError("error_path and error_values go together")
        return self


class AvailabilitySpec(_Model):
    """How the firmware signals online/offline: a retained LWT/status topic, silence, or both."""

    topic: str | None = None
    path: str | None = None
    online: str = "online"
    offline: str = "offline"
    qos: Qos = 0
    retain: bool = True
    silence_timeout_s: Seconds | None = None

    @model_validator(mode="after")
    def _check(self) -> AvailabilitySpec:
        if self.topic is None and self.silence_timeout_s is None:
            raise ValueError("give a status topic, a silence_timeout_s, or both")
        if self.online == self.offline:
            raise ValueError("online and offline payloads must differ")
        if self.path is not None and self.topic is None:
            raise ValueError("path is for a JSON status topic")
        return self


class CommandMessage(_Model):
    """One MQTT message sent for a command; ``when`` selects it by the commanded on/off state."""

    topic: str = Field(min_length=1)
    payload: str
    when: Literal["always", "on", "off"] = "always"


class CommandSpec(_Model):
    """How a command kind is encoded. Level commands map 0-100 % onto ``levels`` device steps."""

    messages: tuple[CommandMessage, ...] = ()
    levels: int | None = Field(default=None, ge=1, le=10000)
    zero_turns_off: bool = False
    on: str = "ON"
    off: str = "OFF"
    qos: Qos = 1
    retain: bool = False


class SerialSpec(_Model):
    """Port settings and the line protocol of a serial firmware (EZO: ASCII, CR-terminated)."""

    baudrate: int = Field(default=9600, gt=0)
    bytesize: Literal[7, 8] = 8
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Literal[1, 2] = 1
    terminator: str = Field(default="\r", min_length=1)
    encoding: str = "ascii"
    response_timeout_s: Seconds = 2.0
    ok_response: str = "*OK"
    error_response: str = "*ER"
    events: tuple[str, ...] = ()
    init_commands: tuple[str, ...] = ()
    read_command: str = Field(min_length=1)
    read_delay_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    command_delay_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    field_separator: str = ","
    metrics: tuple[MetricSpec, ...] = Field(min_length=1)
    temperature_command: str | None = None
    temperature_decimals: int = Field(default=1, ge=0, le=3)
    commands: dict[Ident, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SerialSpec:
        for metric in self.metrics:
            if metric.index is None or metric.path:
                raise ValueError(f"{metric.name}: a serial metric needs index and no path")
        if self.temperature_command is not None and placeholders(self.temperature_command) != {
            "value"
        }:
            raise ValueError("temperature_command must contain {value}")
        return self


class CalibrationPoint(_Model):
    """One on-device calibration step, e.g. EZO pH ``Cal,mid,{value}``."""

    name: Ident
    command: str = Field(min_length=1)
    default: Number | None = None
    min: Number | None = None
    max: Number | None = None
    decimals: int = Field(default=2, ge=0, le=6)

    @property
    def takes_value(self) -> bool:
        """True when the step sends the reference value (``{value}`` in the command)."""
        return "value" in placeholders(self.command)


class CalibrationSpec(_Model):
    """How a device is calibrated: on the device (EZO) or in the agent (offset or linear fit)."""

    performed_by: Literal["device", "agent"]
    metrics: tuple[Ident, ...] = Field(min_length=1)
    method: Literal["offset", "linear"] | None = None
    min_points: int = Field(default=1, ge=1, le=10)
    max_points: int = Field(default=1, ge=1, le=10)
    points: tuple[CalibrationPoint, ...] = ()
    sequences: tuple[tuple[Ident, ...], ...] = ()
    clear_command: str | None = None
    query_command: str | None = None
    query_prefix: str | None = None
    processing_delay_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    instructions: str = ""

    @model_validator(mode="after")
    def _check(self) -> CalibrationSpec:
        if self.min_points > self.max_points:
            raise ValueError("min_points must not exceed max_points")
        if self.performed_by == "agent":
            if self.method is None:
                raise ValueError("agent calibration needs method (offset or linear)")
            if self.points or self.sequences or self.clear_command or self.query_command:
                raise ValueError("points, sequences and commands are for device calibration")
            if self.method == "offset" and self.max_points != 1:
                raise ValueError("an offset calibration takes exactly one point")
            return self
        if self.method is not None:
            raise ValueError("method is for agent calibration")
        if not self.points or not self.sequences:
            raise ValueError("device calibration needs points and sequences")
        names = [point.name for point in self.points]
        if len(set(names)) != len(names):
            raise ValueError("calibration point names must be unique")
        for sequence in self.sequences:
            unknown = set(sequence) - set(names)
            if unknown or not sequence:
                raise ValueError(f"sequence {list(sequence)} names unknown points {unknown}")
        lengths = [len(sequence) for sequence in self.sequences]
        if (self.min_points, self.max_points) != (min(lengths), max(lengths)):
            raise ValueError(
                f"min_points/max_points must be {min(lengths)}/{max(lengths)} for these sequences"
            )
        return self

    def point(self, name: str) -> CalibrationPoint:
        """Return the calibration point called ``name`` (KeyError if absent)."""
        for point in self.points:
            if point.name == name:
                return point
        raise KeyError(name)


class GoldenPayload(_Model):
    """A real payload and what decoding it must yield; checked by the test suite."""

    name: str
    topic: str | None = None
    payload: str | None = None
    payload_hex: str | None = None
    line: str | None = None
    expect_metrics: dict[Ident, float] = Field(default_factory=dict)
    expect_states: dict[StateField, bool | int] = Field(default_factory=dict)
    expect_online: bool | None = None
    expect_rejected: dict[Ident, RejectReason] = Field(default_factory=dict)
    expect_error: bool = False
    expect_command_error: bool = False
    expect_device_time: str | None = None

    @model_validator(mode="after")
    def _check(self) -> GoldenPayload:
        if (self.payload is None) == (self.payload_hex is None) and self.line is None:
            raise ValueError("give exactly one of payload or payload_hex (or line for serial)")
        if self.line is not None and (self.topic or self.payload or self.payload_hex):
            raise ValueError("a serial golden has a line and no topic or payload")
        if self.line is None and self.topic is None:
            raise ValueError("an MQTT golden needs a topic")
        return self

    @property
    def raw(self) -> bytes:
        """The payload (or serial line) as bytes."""
        if self.payload_hex is not None:
            return bytes.fromhex(self.payload_hex)
        return (self.payload if self.payload is not None else self.line or "").encode()


class GoldenMessage(_Model):
    """An MQTT message a command must produce."""

    topic: str
    payload: str


class GoldenCommand(_Model):
    """A command and what encoding it must yield (MQTT messages or a serial line)."""

    command: CommandKind | Literal["calibrate", "temperature"]
    value: bool | int | float | None = None
    point: Ident | None = None
    expect_messages: tuple[GoldenMessage, ...] = ()
    expect_line: str | None = None
    expect_state: dict[StateField, bool | int] = Field(default_factory=dict)


class FirmwareProfile(_Model):
    """A device firmware described as data; ``id`` matches the file name."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=64)
    name: str = Field(min_length=1)
    firmware: str = Field(min_length=1)
    kind: DeviceKind
    device_type: str | None = None
    transport: Transport
    sources: tuple[str, ...] = ()
    variables: dict[Ident, str] = Field(default_factory=dict)
    messages: tuple[MessageSpec, ...] = ()
    availability: AvailabilitySpec | None = None
    commands: dict[CommandKind, CommandSpec] = Field(default_factory=dict)
    serial: SerialSpec | None = None
    modbus: ModbusSpec | None = None
    calibration: CalibrationSpec | None = None
    golden: tuple[GoldenPayload, ...] = ()
    golden_commands: tuple[GoldenCommand, ...] = ()

    @property
    def metrics(self) -> tuple[MetricSpec, ...]:
        """Every metric the device reports, in profile order."""
        if self.serial is not None:
            return self.serial.metrics
        if self.modbus is not None:
            return self._modbus_metrics
        return tuple(metric for message in self.messages for metric in message.metrics)

    @cached_property
    def _modbus_metrics(self) -> tuple[MetricSpec, ...]:
        assert self.modbus is not None
        shared: tuple[str, ...] = ("name", "unit", "scale", "offset", "min", "max", "optional")
        shared += ("decimals", "typical")
        return tuple(
            MetricSpec.model_validate({key: getattr(metric, key) for key in shared})
            for metric in self.modbus.metrics
        )

    @property
    def state_fields(self) -> frozenset[str]:
        """The state fields the device reports."""
        if self.modbus is not None:
            return frozenset(state.field for state in self.modbus.states)
        return frozenset(state.field for message in self.messages for state in message.states)

    @cached_property
    def _metrics_by_name(self) -> dict[str, MetricSpec]:
        # Looked up for every reading ingested; the first metric of a name wins, as before.
        by_name: dict[str, MetricSpec] = {}
        for metric in self.metrics:
            by_name.setdefault(metric.name, metric)
        return by_name

    def metric(self, name: str) -> MetricSpec:
        """Return the metric called ``name`` (KeyError if absent)."""
        return self._metrics_by_name[name]


class ProfileRegistry(Mapping[str, FirmwareProfile]):
    """The validated profiles by id, with the file each came from."""

    def __init__(self, profiles: Mapping[str, tuple[FirmwareProfile, Path]]) -> None:
        self._profiles = {key: profile for key, (profile, _) in profiles.items()}
        self._paths = {key: path for key, (_, path) in profiles.items()}

    def __getitem__(self, profile_id: str) -> FirmwareProfile:
        return self._profiles[profile_id]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._profiles))

    def __len__(self) -> int:
        return len(self._profiles)

    def path_of(self, profile_id: str) -> Path:
        """Return the file a profile was loaded from."""
        return self._paths[profile_id]


def load_profiles(directory: str | Path) -> ProfileRegistry:
    """Load and validate every ``*.toml`` profile in ``directory``; ProfileError if one is bad."""
    root = Path(directory)
    if not root.is_dir():
        raise ProfileError(str(root), "(directory)", "not a directory")
    found: dict[str, tuple[FirmwareProfile, Path]] = {}
    for path in sorted(root.glob("*.toml")):
        profile = load_profile(path)
        if profile.id in found:
            raise ProfileError(str(path), "id", f"duplicate of {found[profile.id][1]}")
        found[profile.id] = (profile, path)
    if not found:
        raise ProfileError(str(root), "(directory)", "no *.toml firmware profiles found")
    return ProfileRegistry(found)


def load_profile(path: str | Path) -> FirmwareProfile:
    """Load and validate one profile file; raise ProfileError naming the file and field."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        raise ProfileError(str(file), "(file)", str(err)) from err
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(str(file), "(toml)", str(err)) from err
    try:
        profile = FirmwareProfile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise ProfileError(str(file), _field_name(first["loc"]), first["msg"]) from err
    if profile.id != file.stem:
        raise ProfileError(str(file), "id", f"must match the file name {file.stem!r}")
    for field, problem in _cross_check(profile):
        raise ProfileError(str(file), field, problem)
    return profile


def _field_name(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts) or "(profile)"


_SWITCH_PAYLOAD = {"switch"}
_LEVEL_PAYLOAD = {"level", "percent"}


def _cross_check(profile: FirmwareProfile) -> Iterator[tuple[str, str]]:
    """Yield (field, problem) for rules spanning several tables; the loader stops at the first."""
    topic_names = {"base", *profile.variables}
    if profile.transport != "modbus" and not profile.golden:
        yield "golden", "give at least one [[golden]] payload"
    if profile.transport != "modbus" and profile.modbus is not None:
        yield "modbus", f"a {profile.transport} profile has no [modbus] table"
    if profile.transport == "modbus":
        yield from _check_modbus(profile)
    elif profile.transport == "mqtt":
        if profile.serial is not None:
            yield "serial", "an MQTT profile has no [serial] table"
        if not profile.messages:
            yield "messages", "an MQTT profile needs at least one [[messages]] table"
        for kind, command in profile.commands.items():
            if not command.messages:
                yield f"commands.{kind}.messages", "an MQTT command needs at least one message"
    else:
        if profile.serial is None:
            yield "serial", "a serial profile needs a [serial] table"
        if profile.messages or profile.commands:
            yield "messages", "a serial profile has no MQTT messages or commands"
        if profile.availability is not None and profile.availability.topic is not None:
            yield "availability.topic", "a serial device has no status topic"
    for i, message in enumerate(profile.messages):
        yield from _check_template(f"messages[{i}].topic", message.topic, topic_names)
    if profile.availability is not None and profile.availability.topic is not None:
        yield from _check_template("availability.topic", profile.availability.topic, topic_names)
        if profile.availability.topic in {message.topic for message in profile.messages}:
            yield "availability.topic", "the status topic must not also be a [[messages]] topic"
    yield from _check_unique_metrics(profile)
    for kind, command in profile.commands.items():
        allowed = _SWITCH_PAYLOAD if kind in SWITCH_FIELDS else _LEVEL_PAYLOAD
        if (
            kind not in SWITCH_FIELDS
            and command.levels is None
            and any("level" in placeholders(m.payload) for m in command.messages)
        ):
            yield f"commands.{kind}.levels", "{level} in a payload needs levels"
        for i, sent in enumerate(command.messages):
            where = f"commands.{kind}.messages[{i}]"
            yield from _check_template(f"{where}.topic", sent.topic, topic_names)
            yield from _check_template(f"{where}.payload", sent.payload, allowed)
    yield from _check_calibration(profile)
    yield from _check_golden(profile)


def _check_modbus(profile: FirmwareProfile) -> Iterator[tuple[str, str]]:
    if profile.modbus is None:
        yield "modbus", "a Modbus profile needs a [modbus] table"
        return
    if profile.serial is not None or profile.messages or profile.golden:
        yield "modbus", "a Modbus profile has no [serial], [[messages]] or [[golden]] tables"
    if profile.availability is not None and profile.availability.topic is not None:
        yield "availability.topic", "a Modbus device has no status topic"
    written = {write.command for write in profile.modbus.writes}
    for kind in profile.commands:
        if kind not in written:
            yield f"commands.{kind}", "no [[modbus.writes]] for this command"
    for kind in written - set(profile.commands):
        yield "modbus.writes", f"a write for {kind!r} needs a [commands.{kind}] table"


def _check_template(field: str, template: str, allowed: set[str]) -> Iterator[tuple[str, str]]:
    unknown = placeholders(template) - allowed
    if unknown:
        yield field, f"unknown placeholder(s) {sorted(unknown)}; allowed: {sorted(allowed)}"


def _check_unique_metrics(profile: FirmwareProfile) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for metric in profile.metrics:
        if metric.name in seen:
            yield "metrics", f"metric {metric.name!r} is defined twice"
        seen.add(metric.name)


def _check_calibration(profile: FirmwareProfile) -> Iterator[tuple[str, str]]:
    calibration = profile.calibration
    if calibration is None:
        return
    names = {metric.name for metric in profile.metrics}
    for metric in calibration.metrics:
        if metric not in names:
            yield "calibration.metrics", f"unknown metric {metric!r}"
    if calibration.performed_by == "device" and profile.transport != "serial":
        yield "calibration.performed_by", "on-device calibration needs a serial profile"
    for i, point in enumerate(calibration.points):
        yield from _check_template(f"calibration.points[{i}].command", point.command, {"value"})


def _check_golden(profile: FirmwareProfile) -> Iterator[tuple[str, str]]:
    topics = {message.topic for message in profile.messages}
    if profile.availability is not None and profile.availability.topic is not None:
        topics.add(profile.availability.topic)
    names = {metric.name for metric in profile.metrics} | profile.state_fields
    for i, golden in enumerate(profile.golden):
        where = f"golden[{i}]"
        if profile.transport == "serial" and golden.line is None:
            yield where, "a serial golden gives a line"
        if profile.transport == "mqtt" and golden.topic not in topics:
            yield f"{where}.topic", f"{golden.topic!r} is not a topic of this profile"
        for name in (*golden.expect_metrics, *golden.expect_rejected):
            if name not in names:
                yield where, f"unknown metric or state {name!r}"
    for i, command in enumerate(profile.golden_commands):
        where = f"golden_commands[{i}]"
        if command.command in ("calibrate", "temperature"):
            if profile.serial is None:
                yield f"{where}.command", "calibrate/temperature goldens are for serial profiles"
            if command.expect_line is None:
                yield f"{where}.expect_line", "required for a serial command"
        elif command.command not in profile.commands:
            yield f"{where}.command", f"the profile has no {command.command!r} command"
