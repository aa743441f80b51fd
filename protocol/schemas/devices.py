"""The device registry and its views (docs/design.md sections 5, 12).

``/sensor-devices/``, ``/fans/`` and ``/devices`` show one registry: a device has a kind, a
firmware profile (agent/firmware_profiles/<id>.toml) and an address on its transport.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    Field,
    Strict,
    StringConstraints,
    field_validator,
    model_validator,
)

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

__all__ = [
    "AdminStatus",
    "CalibrationData",
    "Device",
    "DeviceCreate",
    "DeviceKind",
    "DeviceLink",
    "DeviceList",
    "DeviceListQuery",
    "DeviceProfile",
    "DeviceProfileList",
    "DeviceProfileMetric",
    "DeviceSort",
    "DeviceStatus",
    "DeviceStatusUpdate",
    "DeviceUpdate",
    "Fan",
    "FanList",
    "FanListQuery",
    "FanStatus",
    "ListSearch",
    "ModbusAddress",
    "MqttAddress",
    "SensorDevice",
    "SensorDeviceCreate",
    "SensorDeviceList",
    "SensorDeviceQuery",
    "SerialAddress",
]

DeviceKind = Literal["sensor", "fan", "light", "pump", "valve"]
AdminStatus = Literal["active", "maintenance", "disabled"]
"""Set with PUT /devices/{id}/status; ``active`` shows the observed online/offline."""
DeviceStatus = Literal["online", "offline", "maintenance", "disabled"]
FanStatus = Literal["running", "stopped", "offline", "maintenance", "disabled"]

Ident = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
ProfileId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=64)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Location = Annotated[str, StringConstraints(max_length=200)]

MacAddress = Annotated[
    str,
    StringConstraints(
        to_upper=True,
        pattern=r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$|^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){7}$",
    ),
]
"""EUI-48 or EUI-64 as colon-separated hexadecimal pairs, stored upper-case."""

FirmwareVersion = Annotated[
    str,
    StringConstraints(max_length=32, pattern=r"^\d+(\.\d+){1,3}([-+][0-9A-Za-z][0-9A-Za-z.-]*)?$"),
]
"""Dotted numbers (``2.16``, ``14.3.0``, ``2024.6.1``), optionally with a ``-beta``-style tag."""

# Numbers in bodies are strict: JSON true, "50" or 50.5 is a wrong type (422), not a level.
BatteryLevel = Annotated[int, Strict(), Field(ge=0, le=100)]
SpeedCap = Annotated[int, Strict(), Field(ge=1, le=100)]
Watts = Annotated[float, Strict(), Field(ge=0, le=100_000, allow_inf_nan=False)]

_CALIBRATION_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_MAX_CALIBRATION_KEYS = 32

CalibrationData = dict[str, bool | float | str]
"""Calibration metadata: ``ph_offset`` (number), ``temperature_compensation`` (boolean). A
``<metric>_offset`` for a metric of the device's profile becomes its first active agent-side
calibration."""


def check_calibration_data(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validate calibration metadata: scalar values, sane keys, typed known keys."""
    if data is None:
        return None
    if len(data) > _MAX_CALIBRATION_KEYS:
        raise ValueError(f"at most {_MAX_CALIBRATION_KEYS} keys")
    for key, value in data.items():
        if not _CALIBRATION_KEY.match(key):
            raise ValueError(f"{key!r}: keys are lower-case identifiers")
        if isinstance(value, str) and len(value) > 200:
            raise ValueError(f"{key}: at most 200 characters")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key}: must be a finite number")
        if key == "temperature_compensation" and not isinstance(value, bool):
            raise ValueError("temperature_compensation must be a boolean")
        if key.endswith("_offset") and (isinstance(value, bool) or not isinstance(value, float)):
            raise ValueError(f"{key} must be a number")
    return data


# Addresses ------------------------------------------------------------------------------------


class MqttAddress(ApiModel):
    """Where an MQTT device publishes: its topic base (``{base}`` in the profile's topics)."""

    transport: Literal["mqtt"]
    topic_base: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[^/+#\x00\s]([^+#\x00\s]*[^/+#\x00\s])?$",
        description="Tasmota topic or ESPHome node prefix; no wildcards, no leading/trailing /",
    )
    variables: dict[Ident, Annotated[str, StringConstraints(min_length=1, max_length=64)]] = Field(
        default_factory=dict,
        max_length=16,
        description="Overrides of the profile's [variables] (e.g. an ESPHome sensor's name)",
    )


class SerialAddress(ApiModel):
    """Where a serial device is attached, and line settings overriding its profile's."""

    transport: Literal["serial"]
    port: str = Field(
        min_length=1,
        max_length=255,
        pattern=r"^[^\x00\s]+$",
        description="Device path (prefer /dev/serial/by-id/...) or a pyserial URL",
    )
    baudrate: Literal[1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200] | None = None
    bytesize: Literal[7, 8] | None = None
    parity: Literal["N", "E", "O"] | None = None
    stopbits: Literal[1, 2] | None = None


class ModbusAddress(ApiModel):
    """A Modbus device: its bus (a serial port for RTU, or a TCP host and port) and unit id.

    Several devices share one RS-485 bus, each with its own unit id; line settings left out
    are the profile's.
    """

    transport: Literal["modbus"]
    port: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        pattern=r"^[^\x00\s]+$",
        description="RS-485 adapter (prefer /dev/serial/by-id/...): Modbus RTU",
    )
    host: str | None = Field(
        None,
        min_length=1,
        max_length=253,
        pattern=r"^[A-Za-z0-9.:_-]+$",
        description="Host name or IP of a Modbus TCP device or gateway",
    )
    tcp_port: int | None = Field(None, ge=1, le=65535, description="TCP port (default 502)")
    unit: int = Field(ge=1, le=247, description="Modbus unit id (slave address) on the bus")
    baudrate: Literal[1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200] | None = None
    bytesize: Literal[7, 8] | None = None
    parity: Literal["N", "E", "O"] | None = None
    stopbits: Literal[1, 2] | None = None

    @model_validator(mode="after")
    def _one_bus(self) -> ModbusAddress:
        if (self.port is None) == (self.host is None):
            raise ValueError("give port (Modbus RTU) or host (Modbus TCP), not both")
        if self.host is not None and (
            self.baudrate or self.bytesize or self.parity or self.stopbits
        ):
            raise ValueError("line settings are for a serial port, not a TCP host")
        if self.port is not None and self.tcp_port is not None:
            raise ValueError("tcp_port is for a TCP host")
        return self

    @property
    def bus(self) -> str:
        """The bus the device is on: its port, or ``tcp://host:port``."""
        if self.port is not None:
            return self.port
        return f"tcp://{self.host}:{self.tcp_port or 502}"


Address = Annotated[MqttAddress | SerialAddress | ModbusAddress, Field(discriminator="transport")]


# Requests -------------------------------------------------------------------------------------


class _Registration(ApiModel):
    """Fields every registration takes."""

    name: Name
    farm_id: UUID
    location: Location = ""
    profile: ProfileId | None = Field(
        None, description="Firmware profile id; without one the device is listed but not bound"
    )
    address: Address | None = Field(None, description="Required with a profile")
    mac_address: MacAddress | None = None
    firmware_version: FirmwareVersion | None = None
    battery_level: BatteryLevel | None = None
    calibration_data: CalibrationData | None = None

    _calibration = field_validator("calibration_data")(check_calibration_data)

    @model_validator(mode="after")
    def _profile_with_address(self) -> _Registration:
        if (self.profile is None) != (self.address is None):
            raise ValueError("profile and address go together")
        return self


class SensorDeviceCreate(_Registration):
    """POST /sensor-devices/ (the sensor device fields, plus profile and address to bind it)."""

    device_type: Ident


class DeviceCreate(_Registration):
    """POST /devices: any kind of device."""

    kind: DeviceKind
    device_type: Ident | None = Field(
        None, description="Defaults to the profile's device_type, else to the kind"
    )
    max_speed: SpeedCap | None = Field(None, description="Fans: speed cap in %")
    rated_power_w: Watts | None = Field(None, description="Nameplate power in watts")


class DeviceUpdate(ApiModel):
    """PUT /api/v1/devices/{id}: rename a device or move it; absent fields stay as they are."""

    name: Name | None = None
    location: Location | None = None

    @model_validator(mode="after")
    def _something(self) -> DeviceUpdate:
        if self.name is None and self.location is None:
            raise ValueError("give name or location")
        return self


class DeviceProfileMetric(Schema):
    """One quantity a profile's device reports."""

    name: str
    unit: str


class DeviceProfile(Schema):
    """A firmware profile a device can be registered with (firmware_profiles/*.toml)."""

    id: str
    name: str
    firmware: str
    kind: str
    device_type: str | None
    transport: Literal["mqtt", "serial", "modbus"]
    variables: dict[str, str] = Field(description="Topic variables and their defaults")
    metrics: list[DeviceProfileMetric]
    commands: list[str]


class DeviceProfileList(Schema):
    """GET /api/v1/device-profiles: every loaded profile (a short, fixed list; not paged)."""

    profiles: list[DeviceProfile]
    total: int


class DeviceStatusUpdate(ApiModel):
    """PUT /devices/{id}/status: take a device out of service or back.

    ``maintenance`` keeps it bound and recording; ``disabled`` unbinds it; ``active`` shows its
    observed online/offline status again.
    """

    status: AdminStatus


class SensorDeviceQuery(PageQuery):
    """Query of GET /sensor-devices/."""

    farm_id: UUID | None = None
    device_type: Ident | None = None
    status: DeviceStatus | None = None


class FanListQuery(PageQuery):
    """Query of GET /fans/."""

    farm_id: UUID | None = None
    status: FanStatus | None = None


DeviceSort = Literal["name", "-name", "kind", "location", "status", "last_seen", "-last_seen"]


class ListSearch(PageQuery):
    """Search, place and order of a device list (GET /devices, GET /sensors)."""

    location: str | None = Field(
        None, max_length=200, description="Exactly this location (case-insensitive)"
    )
    q: str | None = Field(
        None, max_length=200, description="Name, location or device type contains this"
    )
    sort: DeviceSort = Field(
        "name", description="Order of the list; '-' sorts descending; ties by name"
    )


class DeviceListQuery(ListSearch):
    """Query of GET /devices."""

    farm_id: UUID | None = None
    kind: DeviceKind | None = None
    device_type: Ident | None = None
    status: DeviceStatus | None = None


# Responses ------------------------------------------------------------------------------------


class SensorDevice(Schema):
    """A sensor device as /sensor-devices shows it (docs/design.md section 12)."""

    id: Uuid
    name: str
    device_type: str
    farm_id: Uuid
    location: str
    status: DeviceStatus
    last_reading: Timestamp | None
    battery_level: int | None
    firmware_version: str | None
    mac_address: str | None
    calibration_data: dict[str, bool | float | str]


class SensorDeviceList(Schema):
    """GET /sensor-devices/."""

    devices: list[SensorDevice]
    total: int
    limit: int
    offset: int


class Fan(Schema):
    """A fan as /fans shows it; speeds in percent, power in watts."""

    id: Uuid
    name: str
    farm_id: Uuid
    location: str
    status: FanStatus
    current_speed: int
    max_speed: int
    power_consumption: float
    runtime_hours: int


class FanList(Schema):
    """GET /fans/."""

    fans: list[Fan]
    total: int
    limit: int
    offset: int


class DeviceLink(Schema):
    """How a polled (Modbus) device's requests went since the agent started."""

    polls: int
    answered: int
    timeouts: int = Field(description="Requests with no answer")
    crc_errors: int = Field(description="Answers rejected: bad CRC or framing")
    exceptions: int = Field(description="Modbus exception answers (e.g. illegal address)")
    connection_errors: int = Field(description="The bus could not be opened")
    consecutive_failures: int


class Device(Schema):
    """A device in the registry, every field."""

    id: Uuid
    farm_id: Uuid
    name: str
    kind: DeviceKind
    device_type: str
    location: str
    status: DeviceStatus
    admin_status: AdminStatus
    profile: str | None
    address: Address | None
    mac_address: str | None
    firmware_version: str | None
    battery_level: int | None
    calibration_data: dict[str, bool | float | str]
    state: dict[str, bool | int]
    max_speed: int | None
    rated_power_w: float | None
    last_reading: Timestamp | None
    last_seen: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp
    link: DeviceLink | None = Field(
        None, description="Link counters of a device the agent polls (Modbus); else null"
    )


class DeviceList(Schema):
    """GET /devices."""

    devices: list[Device]
    total: int
    limit: int
    offset: int
