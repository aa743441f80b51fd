"""Which devices answer on a Modbus bus: each unit id asked for each shipped profile's registers.

``scan_bus`` reads, for every unit id asked about, the registers of every Modbus profile given
(the metrics and read-back states of its register map) with a short timeout. A profile
"answers sensibly" at a unit when every block reads without an exception and every value
decodes within its valid range; the candidate proposes the profile that answered with the most
values (ties: the profile whose factory unit id this is, then by id). Requests go one at a
time through the bus's lock, so a scan never talks over the polls of an open bus. A bus that
cannot be opened raises ``ModbusFailure`` (kind ``connection``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.devices.modbus.bus import BusAddress, ModbusBus, ModbusFailure
from agent.devices.modbus.codec import ModbusCodec
from agent.devices.profiles import FirmwareProfile

__all__ = ["ModbusCandidate", "candidate_key", "scan_bus"]


def candidate_key(address: BusAddress, unit: int) -> str:
    """A stable key of a device found on a bus: ``modbus:/dev/ttyUSB0:17``."""
    return f"modbus:{address.key}:{unit}"


@dataclass(frozen=True)
class ModbusCandidate:
    """A device that answered a scan, and how to register it."""

    key: str
    unit: int
    profile_id: str
    address: dict[str, Any]
    """The proposed registration address (``ModbusAddress`` fields)."""
    readings: dict[str, float | bool | int]
    """The first values read: metrics in their units, states as reported."""
    other_profiles: tuple[str, ...] = ()
    """Other profiles whose registers also answered sensibly."""
    source: str = field(default="modbus")


async def scan_bus(
    bus: ModbusBus,
    unit_ids: Iterable[int],
    profiles: Mapping[str, FirmwareProfile],
    *,
    timeout: float = 0.3,  # noqa: ASYNC109
) -> list[ModbusCandidate]:
    """Ask each unit id for each Modbus profile's registers; one candidate per answering unit."""
    codecs = [ModbusCodec(profile) for profile in profiles.values() if profile.modbus is not None]
    found: list[ModbusCandidate] = []
    for unit in unit_ids:
        matches: list[tuple[int, bool, str, dict[str, float | bool | int]]] = []
        for codec in codecs:
            outcome = await _try(bus, unit, codec, timeout)
            if outcome == "timeout":
                break  # nobody answers at this unit id: do not wait out every profile
            if isinstance(outcome, dict) and outcome:
                factory = codec.spec.unit_id == unit
                matches.append((len(outcome), factory, codec.profile.id, outcome))
        if not matches:
            continue
        matches.sort(key=lambda m: (-m[0], not m[1], m[2]))
        _, _, profile_id, readings = matches[0]
        found.append(
            ModbusCandidate(
                key=candidate_key(bus.address, unit),
                unit=unit,
                profile_id=profile_id,
                address=_address(bus.address, unit),
                readings=readings,
                other_profiles=tuple(m[2] for m in matches[1:]),
            )
        )
    return found


async def _try(
    bus: ModbusBus,
    unit: int,
    codec: ModbusCodec,
    timeout: float,  # noqa: ASYNC109
) -> dict[str, float | bool | int] | str:
    """The values read, or why not: ``timeout`` (no answer), ``refused`` or ``nonsense``."""
    try:
        answers = await bus.read(unit, codec.blocks, timeout)
    except ModbusFailure as failure:
        if failure.kind == "connection":
            raise  # the bus itself cannot be opened: no unit can answer
        return "timeout" if failure.kind == "timeout" else "refused"
    decoded = codec.decode(answers)
    if decoded.rejected:
        return "nonsense"
    readings: dict[str, float | bool | int] = {m.metric: m.value for m in decoded.measurements}
    readings.update({s.field: s.value for s in decoded.states})
    return readings


def _address(address: BusAddress, unit: int) -> dict[str, Any]:
    if address.host is not None:
        return {
            "transport": "modbus",
            "host": address.host,
            "tcp_port": address.tcp_port,
            "unit": unit,
        }
    return {
        "transport": "modbus",
        "port": address.port,
        "unit": unit,
        "baudrate": address.baudrate,
        "bytesize": address.bytesize,
        "parity": address.parity,
        "stopbits": address.stopbits,
    }
