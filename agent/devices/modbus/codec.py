"""A Modbus profile's register map as requests and values: what to read, how to decode it.

``ModbusCodec`` plans the reads of one poll (items of one function close together share one
request, as a device answers a block of registers in about the time of one), decodes the
answered registers into the same ``Measurement``/``StateUpdate`` values the MQTT and serial
codecs produce, and turns a command into register writes and the state that confirms it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.devices.codec import (
    Command,
    Decoded,
    Measurement,
    Rejection,
    StateUpdate,
)
from agent.devices.modbus_spec import ModbusMetric, ModbusSpec, ModbusState
from agent.devices.profiles import SWITCH_FIELDS, FirmwareProfile

__all__ = ["ModbusCodec", "ReadBlock", "Write", "decode_value"]

#: Largest block one request reads (Modbus application protocol v1.1b3, 6.3/6.4 and 6.1/6.2).
_MAX_REGISTERS = 125
_MAX_BITS = 2000
#: Registers skipped inside one block rather than sending a second request.
_MAX_GAP = 8

_STRUCT = {"int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "float32": ">f"}

Item = ModbusMetric | ModbusState


@dataclass(frozen=True)
class ReadBlock:
    """One read request: ``count`` registers (or bits) of ``function`` from ``address``."""

    function: str
    address: int
    count: int
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Write:
    """One write request: a holding register (function 06) or a coil (function 05)."""

    function: str
    address: int
    value: int


def decode_value(words: Sequence[int], type_: str, word_order: str) -> float:
    """The number ``words`` (16-bit registers, as read) encode as ``type_``."""
    if word_order == "little":
        words = list(reversed(words))
    raw = b"".join(int(word & 0xFFFF).to_bytes(2, "big") for word in words)
    return float(struct.unpack(_STRUCT[type_], raw)[0])


class ModbusCodec:
    """One Modbus profile: the reads of a poll, their decoding, commands as writes."""

    def __init__(self, profile: FirmwareProfile) -> None:
        if profile.modbus is None:
            raise ValueError(f"profile {profile.id} is not a Modbus profile")
        self.profile = profile
        self.spec: ModbusSpec = profile.modbus
        self.blocks = self._plan((*self.spec.metrics, *self.spec.states))
        self.state_blocks = self._plan(self.spec.states)

    @staticmethod
    def _plan(items: Sequence[Item]) -> tuple[ReadBlock, ...]:
        blocks: list[ReadBlock] = []
        for function in ("input", "holding", "coil", "discrete"):
            mine = sorted((i for i in items if i.function == function), key=lambda i: i.address)
            limit = _MAX_BITS if function in ("coil", "discrete") else _MAX_REGISTERS
            group: list[Item] = []
            for item in mine:
                if group:
                    start = group[0].address
                    end = max(g.address + g.width for g in group)
                    if item.address - end > _MAX_GAP or item.address + item.width - start > limit:
                        blocks.append(_block(function, group))
                        group = []
                group.append(item)
            if group:
                blocks.append(_block(function, group))
        return tuple(blocks)

    def decode(self, answers: Mapping[ReadBlock, Sequence[int]]) -> Decoded:
        """Measurements and states from each block's answered registers (bits as 0/1)."""
        named: dict[str, Sequence[int]] = {}
        for block, values in answers.items():
            for item in block.items:
                start = item.address - block.address
                named[_name(item)] = values[start : start + item.width]
        return self.decode_named(named)

    def decode_named(self, registers: Mapping[str, Sequence[int]]) -> Decoded:
        """Decode registers given by metric or state name (the profile's goldens use this)."""
        measurements: list[Measurement] = []
        states: list[StateUpdate] = []
        rejected: list[Rejection] = []
        for metric in self.spec.metrics:
            words = registers.get(metric.name)
            if words is None:
                if not metric.optional:
                    rejected.append(Rejection(metric.name, "missing"))
                continue
            outcome = self._measure(metric, words)
            if isinstance(outcome, Measurement):
                measurements.append(outcome)
            else:
                rejected.append(outcome)
        for state in self.spec.states:
            words = registers.get(state.field)
            if words is None:
                rejected.append(Rejection(state.field, "missing"))
                continue
            found = self._state(state, words)
            if isinstance(found, StateUpdate):
                states.append(found)
            else:
                rejected.append(found)
        return Decoded(tuple(measurements), tuple(states), tuple(rejected))

    def _measure(self, metric: ModbusMetric, words: Sequence[int]) -> Measurement | Rejection:
        if len(words) != metric.width:
            return Rejection(metric.name, "malformed", str(list(words)))
        number = decode_value(words, metric.type, self.spec.word_order_of(metric))
        if not math.isfinite(number):
            return Rejection(metric.name, "not_a_number", str(list(words)))
        value = number * metric.scale + metric.offset
        if not metric.min <= value <= metric.max:
            return Rejection(metric.name, "out_of_range", str(list(words)))
        return Measurement(metric.name, value, metric.unit)

    def _state(self, state: ModbusState, words: Sequence[int]) -> StateUpdate | Rejection:
        if len(words) != state.width:
            return Rejection(state.field, "malformed", str(list(words)))
        raw = int(decode_value(words, state.type, self.spec.word_order_of(state)))
        if state.full_scale is None:
            return StateUpdate(state.field, (raw & state.mask) == state.on)
        percent = round(raw * 100 / state.full_scale)
        if not 0 <= percent <= 100:
            return Rejection(state.field, "out_of_range", str(raw))
        return StateUpdate(state.field, percent)

    def writes(self, command: Command) -> list[Write]:
        """The register writes a command sends, in profile order (ValueError if it has none)."""
        if command.kind not in self.profile.commands:
            raise ValueError(f"firmware {self.profile.id} has no {command.kind} command")
        on = bool(command.value)
        sent: list[Write] = []
        for write in self.spec.writes:
            if write.command != command.kind or write.when == ("off" if on else "on"):
                continue
            if write.value is not None:
                value = write.value
            elif command.kind in SWITCH_FIELDS:
                value = int(on)
            else:
                scale = write.full_scale if write.full_scale is not None else 100.0
                value = round(int(command.value) * scale / 100)
            sent.append(Write(write.function, write.address, value))
        return sent

    def expected_state(self, command: Command) -> dict[str, bool | int]:
        """The state read back that confirms a command (only fields the device reports)."""
        reported = self.profile.state_fields
        if command.kind in SWITCH_FIELDS:
            expected: dict[str, bool | int] = {command.kind: bool(command.value)}
        elif self.profile.commands[command.kind].zero_turns_off and int(command.value) == 0:
            expected = {"power": False}
        else:
            expected = {command.kind: int(command.value)}
        return {key: value for key, value in expected.items() if key in reported}


def _name(item: Item) -> str:
    return item.name if isinstance(item, ModbusMetric) else item.field


def _block(function: str, group: list[Item]) -> ReadBlock:
    start = group[0].address
    end = max(item.address + item.width for item in group)
    return ReadBlock(function, start, end - start, tuple(group))
