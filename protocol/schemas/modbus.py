"""POST /api/v1/modbus/scans: which Modbus devices answer on a bus, and how to register them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from protocol.schemas.common import ApiModel
from protocol.schemas.devices import ModbusAddress

__all__ = ["ModbusCandidateView", "ModbusScanCreate", "ModbusScanResult"]

#: Unit ids one scan may ask about: a silent unit id costs one timeout.
MAX_SCAN_UNITS = 64


class ModbusScanCreate(ApiModel):
    """A bus (serial port with line settings, or TCP host) and the unit ids to ask."""

    port: str | None = Field(
        None, min_length=1, max_length=255, pattern=r"^[^\x00\s]+$", description="RS-485 port"
    )
    host: str | None = Field(
        None, min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:_-]+$", description="TCP host"
    )
    tcp_port: int = Field(502, ge=1, le=65535)
    baudrate: Literal[1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200] = 9600
    bytesize: Literal[7, 8] = 8
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Literal[1, 2] = 1
    first_unit: int = Field(1, ge=1, le=247)
    last_unit: int = Field(16, ge=1, le=247)
    timeout_s: float = Field(0.3, ge=0.05, le=2.0, description="Reply timeout per request")

    @model_validator(mode="after")
    def _check(self) -> ModbusScanCreate:
        if (self.port is None) == (self.host is None):
            raise ValueError("give port (Modbus RTU) or host (Modbus TCP), not both")
        if self.last_unit < self.first_unit:
            raise ValueError("last_unit must not be below first_unit")
        if self.last_unit - self.first_unit + 1 > MAX_SCAN_UNITS:
            raise ValueError(f"scan at most {MAX_SCAN_UNITS} unit ids at a time")
        return self


class ModbusCandidateView(ApiModel):
    """A device that answered: the profile whose registers it answered, and first values."""

    source: Literal["modbus"] = "modbus"
    key: str = Field(description="Stable key, e.g. modbus:/dev/ttyUSB0:17")
    unit: int
    profile: str = Field(description="Proposed firmware profile id")
    address: ModbusAddress = Field(description="Proposed registration address")
    readings: dict[str, float | bool | int]
    other_profiles: list[str] = Field(description="Other profiles that also answered sensibly")
    found_id: str | None = Field(
        None,
        description="Its entry under Found (/api/v1/discovered-devices), to add it from there;"
        " null when it was ignored or is registered already",
    )


class ModbusScanResult(ApiModel):
    """The devices found, by unit id."""

    candidates: list[ModbusCandidateView]
    scanned: int = Field(description="How many unit ids were asked")
