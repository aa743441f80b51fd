"""The ``[modbus]`` table of a firmware profile: a device model's register map.

Each metric and each piece of actuator state names the Modbus function that reads it (input or
holding registers, coils, discrete inputs), its address (the PDU address, starting at 0), how the
registers encode the value (int16/uint16/int32/uint32/float32 and, for 32-bit values, the word
order), and the scale and offset to its unit. Actuator commands are writes to holding registers
or coils, confirmed by reading the state registers back. docs/firmware-profiles.md documents
every field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "REGISTER_WIDTH",
    "ModbusGolden",
    "ModbusMetric",
    "ModbusSpec",
    "ModbusState",
    "ModbusWrite",
    "RegisterType",
]

Function = Literal["input", "holding", "coil", "discrete"]
RegisterType = Literal["int16", "uint16", "int32", "uint32", "float32"]
WordOrder = Literal["big", "little"]
Address = Annotated[int, Field(ge=0, le=0xFFFF)]
Number = Annotated[float, Field(allow_inf_nan=False)]

#: Registers (16-bit words) each type takes.
REGISTER_WIDTH: dict[str, int] = {
    "int16": 1,
    "uint16": 1,
    "int32": 2,
    "uint32": 2,
    "float32": 2,
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Register(_Model):
    function: Function
    address: Address
    type: RegisterType = "uint16"
    word_order: WordOrder | None = None
    """For 32-bit types: ``big`` (high word first, the Modbus convention) or ``little``."""

    @property
    def width(self) -> int:
        """How many registers (or bits, for coils and discrete inputs) the value takes."""
        return 1 if self.function in ("coil", "discrete") else REGISTER_WIDTH[self.type]

    @model_validator(mode="after")
    def _check_register(self) -> _Register:
        if self.function in ("coil", "discrete") and self.type != "uint16":
            raise ValueError("a coil or discrete input is one bit: leave type out")
        if self.word_order is not None and REGISTER_WIDTH[self.type] == 1:
            raise ValueError("word_order is for 32-bit types")
        if self.address + self.width - 1 > 0xFFFF:
            raise ValueError("the value runs past register 65535")
        return self


class ModbusMetric(_Register):
    """A measured quantity: value = raw x scale + offset, valid within min..max of ``unit``."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
    unit: str = Field(min_length=1)
    scale: Number = 1.0
    offset: Number = 0.0
    min: Number
    max: Number
    optional: bool = False
    decimals: int = Field(default=1, ge=0, le=6)
    typical: Number | None = None

    @model_validator(mode="after")
    def _check_metric(self) -> ModbusMetric:
        if self.min >= self.max:
            raise ValueError(f"min ({self.min}) must be below max ({self.max})")
        if self.scale == 0:
            raise ValueError("scale must not be 0")
        if self.typical is not None and not self.min <= self.typical <= self.max:
            raise ValueError("typical must lie within min..max")
        return self


class ModbusState(_Register):
    """Actuator state read back: on/off (``power``, ``valve``) or a 0-100 % level.

    On/off: on when ``raw & mask == on`` (a coil: when set). A level: ``raw / full_scale``
    as a percentage (a VFD's frequency in 0.01 Hz against its 100 % frequency).
    """

    field: Literal["power", "fan_speed", "brightness", "valve"]
    mask: int = Field(default=0xFFFF, ge=1, le=0xFFFF)
    on: int = Field(default=1, ge=0, le=0xFFFF)
    full_scale: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check_state(self) -> ModbusState:
        switch = self.field in ("power", "valve")
        if switch and self.full_scale is not None:
            raise ValueError(f"{self.field} is on/off and takes no full_scale")
        if not switch and self.full_scale is None:
            raise ValueError(f"{self.field} is a level: give full_scale (the raw value at 100 %)")
        return self


class ModbusWrite(_Model):
    """One write sent for a command; ``when`` selects it by the commanded on/off state.

    The written value is ``value`` when given; else a level command writes
    ``percent x full_scale / 100`` and an on/off command writes 1 or 0 (a coil: set or clear).
    """

    command: Literal["power", "fan_speed", "brightness", "valve"]
    function: Literal["holding", "coil"] = "holding"
    address: Address
    when: Literal["always", "on", "off"] = "always"
    value: int | None = Field(default=None, ge=0, le=0xFFFF)
    full_scale: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class ModbusGolden(_Model):
    """Raw registers (by metric or state name) and what decoding them must yield; tested."""

    name: str
    registers: dict[str, tuple[int, ...]]
    expect_metrics: dict[str, float] = Field(default_factory=dict)
    expect_states: dict[str, bool | int] = Field(default_factory=dict)
    expect_rejected: dict[str, str] = Field(default_factory=dict)


class ModbusSpec(_Model):
    """How a Modbus device model is read, written and polled."""

    poll_interval_s: float = Field(default=10.0, ge=0.05, allow_inf_nan=False)
    timeout_s: float = Field(default=1.0, gt=0, le=30, allow_inf_nan=False)
    offline_after: int = Field(default=2, ge=1, le=10)
    """Consecutive failed polls after which the device is shown offline."""
    word_order: WordOrder = "big"
    unit_id: int = Field(default=1, ge=1, le=247)
    """The factory unit id (the scan proposes it first)."""
    baudrate: Literal[1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200] = 9600
    bytesize: Literal[7, 8] = 8
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Literal[1, 2] = 1
    metrics: tuple[ModbusMetric, ...] = ()
    states: tuple[ModbusState, ...] = ()
    writes: tuple[ModbusWrite, ...] = ()
    golden: tuple[ModbusGolden, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> ModbusSpec:
        if not self.metrics and not self.states:
            raise ValueError("a Modbus device needs metrics or states")
        names = [m.name for m in self.metrics] + [s.field for s in self.states]
        if len(set(names)) != len(names):
            raise ValueError("metric and state names must be unique")
        metrics = {m.name for m in self.metrics}
        states = {s.field for s in self.states}
        for i, golden in enumerate(self.golden):
            unknown = (
                (set(golden.registers) - metrics - states)
                | (set(golden.expect_metrics) - metrics)
                | (set(golden.expect_rejected) - metrics - states)
                | (set(golden.expect_states) - states)
            )
            if unknown:
                raise ValueError(f"golden[{i}] names unknown metrics or states {sorted(unknown)}")
        return self

    def word_order_of(self, register: ModbusMetric | ModbusState) -> WordOrder:
        """The register's word order, else the device's."""
        return register.word_order or self.word_order
