"""Modbus register maps: the shipped profiles decode their goldens; bad maps are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.devices.codec import Command
from agent.devices.errors import ProfileError
from agent.devices.modbus.codec import ModbusCodec
from agent.devices.profiles import FirmwareProfile, load_profile
from agent.devices.simulator.modbus import encode
from tests.agent.modbus.conftest import PROFILES, VFD

GOLDEN = [
    pytest.param(PROFILES[pid], golden, id=f"{pid}: {golden.name}")
    for pid in PROFILES
    if PROFILES[pid].modbus is not None
    for golden in PROFILES[pid].modbus.golden  # type: ignore[union-attr]
]


def test_the_modbus_devices_ship_as_profiles() -> None:
    assert {"modbus-xy-md02", "modbus-senseair-s8", "modbus-vfd-fan"} <= set(PROFILES)
    for pid in ("modbus-xy-md02", "modbus-senseair-s8", "modbus-vfd-fan"):
        assert PROFILES[pid].sources, pid


@pytest.mark.parametrize(("profile", "golden"), GOLDEN)
def test_golden_registers_decode_as_documented(profile: FirmwareProfile, golden) -> None:  # type: ignore[no-untyped-def]
    decoded = ModbusCodec(profile).decode_named(golden.registers)
    values = {m.metric: m.value for m in decoded.measurements}
    assert values == pytest.approx(golden.expect_metrics, abs=1e-6)
    assert {s.field: s.value for s in decoded.states} == golden.expect_states
    assert {r.name: r.reason for r in decoded.rejected} == golden.expect_rejected


_MAP = """
id = "{id}"
name = "test"
firmware = "test"
kind = "sensor"
device_type = "temperature_humidity"
transport = "modbus"

[modbus]
word_order = "{order}"
{extra}

[[modbus.metrics]]
name = "energy"
unit = "kWh"
function = "holding"
address = 10
type = "{type}"
scale = {scale}
offset = {offset}
min = -1000000.0
max = 1000000.0

[[modbus.golden]]
name = "zero"
registers = {{ energy = {zero} }}
expect_metrics = {{ energy = {zero_value} }}
"""


def _profile(tmp_path: Path, **fields: object) -> FirmwareProfile:
    values = {
        "id": "test-map",
        "order": "big",
        "extra": "",
        "type": "int32",
        "scale": 1.0,
        "offset": 0.0,
        "zero": "[0, 0]",
        "zero_value": 0.0,
    }
    values.update(fields)
    path = tmp_path / f"{values['id']}.toml"
    path.write_text(_MAP.format(**values), encoding="utf-8")
    return load_profile(path)


@pytest.mark.parametrize(
    ("type_", "order", "registers", "scale", "offset", "expected"),
    [
        ("int32", "big", [0x0001, 0x86A0], 1.0, 0.0, 100000.0),
        ("int32", "little", [0x86A0, 0x0001], 1.0, 0.0, 100000.0),
        ("int32", "big", [0xFFFF, 0xFFFE], 0.5, 10.0, 9.0),
        ("uint32", "big", [0x0001, 0x0000], 0.01, 0.0, 655.36),
        ("float32", "big", [0x4148, 0x0000], 1.0, 0.0, 12.5),
        ("float32", "little", [0x0000, 0x4148], 2.0, -5.0, 20.0),
    ],
)
def test_registers_decode_by_type_word_order_scale_and_offset(
    tmp_path: Path,
    type_: str,
    order: str,
    registers: list[int],
    scale: float,
    offset: float,
    expected: float,
) -> None:
    profile = _profile(tmp_path, type=type_, order=order, scale=scale, offset=offset)
    decoded = ModbusCodec(profile).decode_named({"energy": registers})
    assert [m.value for m in decoded.measurements] == pytest.approx([expected])
    # The simulator encodes what the agent decodes.
    assert profile.modbus is not None
    assert encode(expected, profile.modbus.metrics[0], profile.modbus) == registers


def test_a_float_register_holding_nan_is_rejected_not_stored(tmp_path: Path) -> None:
    profile = _profile(tmp_path, type="float32")
    decoded = ModbusCodec(profile).decode_named({"energy": [0x7FC0, 0x0000]})
    assert decoded.measurements == ()
    assert [(r.name, r.reason) for r in decoded.rejected] == [("energy", "not_a_number")]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"extra": "unit_id = 300"}, "modbus.unit_id"),
        ({"scale": 0.0}, "scale must not be 0"),
        ({"extra": "offline_after = 0"}, "offline_after"),
    ],
)
def test_a_bad_register_map_stops_start_up_naming_the_field(
    tmp_path: Path, fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(ProfileError) as raised:
        _profile(tmp_path, **fields)
    assert problem in str(raised.value)


def test_a_command_without_register_writes_is_refused(tmp_path: Path) -> None:
    text = (Path(PROFILES.path_of("modbus-vfd-fan"))).read_text(encoding="utf-8")
    text = text.replace('id = "modbus-vfd-fan"', 'id = "no-writes"')
    text = text.replace('command = "power"', 'command = "fan_speed"')
    (tmp_path / "no-writes.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match=r"commands\.power: no \[\[modbus.writes\]\]"):
        load_profile(tmp_path / "no-writes.toml")


def test_a_fan_speed_command_writes_the_frequency_and_run_or_stop() -> None:
    codec = ModbusCodec(VFD)
    writes = [(w.address, w.value) for w in codec.writes(Command("fan_speed", 40))]
    assert writes == [(0x2001, 2000), (0x2000, 2)]
    writes = [(w.address, w.value) for w in codec.writes(Command("fan_speed", 0))]
    assert writes == [(0x2001, 0), (0x2000, 1)]
    assert codec.expected_state(Command("fan_speed", 40)) == {"fan_speed": 40}
