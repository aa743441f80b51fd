"""Every firmware profile decodes its golden payloads and encodes its golden commands."""

from __future__ import annotations

from datetime import UTC

import pytest

from agent.devices.codec import Command, Decoded, DeviceCodec, SerialCodec
from agent.devices.errors import PayloadError
from agent.devices.profiles import (
    FirmwareProfile,
    GoldenCommand,
    GoldenPayload,
    load_profiles,
    render,
)
from agent.settings import DEFAULT_PROFILES_DIR

PROFILES = load_profiles(DEFAULT_PROFILES_DIR)
BASE = "golden-device"

GOLDEN = [
    pytest.param(PROFILES[pid], golden, id=f"{pid}: {golden.name}")
    for pid in PROFILES
    for golden in PROFILES[pid].golden
]
GOLDEN_COMMANDS = [
    pytest.param(PROFILES[pid], command, id=f"{pid}: {command.command} {command.value}")
    for pid in PROFILES
    for command in PROFILES[pid].golden_commands
]


def test_the_real_firmwares_ship_as_profiles() -> None:
    assert set(PROFILES) >= {
        "tasmota-sht3x",
        "tasmota-dht22",
        "tasmota-relay",
        "tasmota-dimmer",
        "tasmota-ifan",
        "esphome-sensor",
        "esphome-fan",
        "atlas-ezo-ph",
        "atlas-ezo-ec",
        "generic-json",
    }


def _decode(profile: FirmwareProfile, golden: GoldenPayload) -> Decoded:
    if profile.transport == "serial":
        assert golden.line is not None
        return SerialCodec(profile).decode_line(golden.line)
    codec = DeviceCodec(profile, BASE)
    assert golden.topic is not None
    return codec.decode(codec.topic(golden.topic), golden.raw, device_tz=UTC)


@pytest.mark.parametrize(("profile", "golden"), GOLDEN)
def test_golden_payload_decodes_as_documented(
    profile: FirmwareProfile, golden: GoldenPayload
) -> None:
    if golden.expect_error:
        with pytest.raises(PayloadError):
            _decode(profile, golden)
        return
    decoded = _decode(profile, golden)
    values = {m.metric: m.value for m in decoded.measurements}
    assert values == pytest.approx(golden.expect_metrics, abs=1e-3)
    for measurement in decoded.measurements:
        assert measurement.unit == profile.metric(measurement.metric).unit
    assert {s.field: s.value for s in decoded.states} == golden.expect_states
    assert {r.name: r.reason for r in decoded.rejected} == golden.expect_rejected
    assert decoded.online == golden.expect_online
    assert (decoded.command_error is not None) == golden.expect_command_error
    if golden.expect_device_time is not None:
        times = {m.device_time.isoformat() for m in decoded.measurements if m.device_time}
        assert times == {golden.expect_device_time}


@pytest.mark.parametrize(("profile", "golden"), GOLDEN_COMMANDS)
def test_golden_command_encodes_as_documented(
    profile: FirmwareProfile, golden: GoldenCommand
) -> None:
    if profile.transport == "serial":
        codec = SerialCodec(profile)
        if golden.command == "calibrate":
            assert golden.point is not None
            value = None if golden.value is None else float(golden.value)
            line = codec.calibration_command(golden.point, value)
        else:
            assert isinstance(golden.value, int | float)
            line = codec.temperature_command(float(golden.value))
        assert line == golden.expect_line
        return
    device = DeviceCodec(profile, BASE)
    kind = golden.command
    assert kind != "calibrate" and kind != "temperature"
    assert isinstance(golden.value, bool | int)
    command = Command(kind, golden.value)
    sent = [(m.topic, m.payload) for m in device.encode(command)]
    assert sent == [(render(m.topic, device.values), m.payload) for m in golden.expect_messages]
    assert device.expected_state(command) == golden.expect_state
    for message in device.encode(command):
        assert (message.qos, message.retain) == (1, False)
