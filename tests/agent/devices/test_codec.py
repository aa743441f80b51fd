"""Decoding and encoding behaviour beyond the golden payloads."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest

from agent.devices.codec import (
    MAX_PAYLOAD_BYTES,
    Command,
    DeviceCodec,
    SerialCodec,
    level_to_percent,
    percent_to_level,
)
from agent.devices.errors import PayloadError
from agent.devices.profiles import ProfileRegistry

SENSOR = (
    b'{"Time":"2026-03-01T10:15:00","SHT3X":{"Temperature":23.4,"Humidity":55.1},"TempUnit":"C"}'
)


def test_naive_device_time_needs_the_device_timezone(profiles: ProfileRegistry) -> None:
    codec = DeviceCodec(profiles["tasmota-sht3x"], "room1")
    without = codec.decode("tele/room1/SENSOR", SENSOR)
    assert {m.device_time for m in without.measurements} == {None}
    cet = timezone(timedelta(hours=1))
    with_tz = codec.decode("tele/room1/SENSOR", SENSOR, device_tz=cet)
    assert {m.device_time for m in with_tz.measurements} == {with_tz.measurements[0].device_time}
    stamp = with_tz.measurements[0].device_time
    assert stamp is not None and stamp.tzinfo == UTC and stamp.hour == 9


def test_unsynchronised_device_clock_is_ignored(profiles: ProfileRegistry) -> None:
    codec = DeviceCodec(profiles["tasmota-sht3x"], "room1")
    payload = SENSOR.replace(b"2026-03-01", b"1970-01-01")
    decoded = codec.decode("tele/room1/SENSOR", payload, device_tz=UTC)
    assert [m.device_time for m in decoded.measurements] == [None, None]
    assert [m.value for m in decoded.measurements] == [23.4, 55.1]


def test_oversized_payload_is_refused_unread(profiles: ProfileRegistry) -> None:
    codec = DeviceCodec(profiles["tasmota-sht3x"], "room1")
    with pytest.raises(PayloadError, match="too large"):
        codec.decode("tele/room1/SENSOR", b" " * (MAX_PAYLOAD_BYTES + 1))


def test_deeply_nested_json_is_a_payload_error(profiles: ProfileRegistry) -> None:
    codec = DeviceCodec(profiles["tasmota-sht3x"], "room1")
    with pytest.raises(PayloadError):
        codec.decode("tele/room1/SENSOR", b"[" * 30000 + b"]" * 30000)


def test_topics_follow_the_base_and_variable_overrides(profiles: ProfileRegistry) -> None:
    codec = DeviceCodec(profiles["esphome-sensor"], "tent-2", {"temperature": "air_temperature"})
    assert set(codec.subscriptions()) == {
        "tent-2/sensor/air_temperature/state",
        "tent-2/sensor/humidity/state",
        "tent-2/status",
    }
    decoded = codec.decode("tent-2/sensor/air_temperature/state", b"21.5")
    assert [(m.metric, m.value, m.unit) for m in decoded.measurements] == [
        ("temperature", 21.5, "°C")
    ]
    with pytest.raises(PayloadError):
        codec.decode("tent-2/sensor/temperature/state", b"21.5")


def test_invalid_bindings_are_refused(profiles: ProfileRegistry) -> None:
    with pytest.raises(ValueError, match="topic base"):
        DeviceCodec(profiles["tasmota-relay"], "room/+")
    with pytest.raises(ValueError, match="no variables"):
        DeviceCodec(profiles["tasmota-relay"], "pump", {"fan": "x"})
    with pytest.raises(ValueError, match="not an MQTT profile"):
        DeviceCodec(profiles["atlas-ezo-ph"], "ph")


def test_commands_are_validated_and_unsupported_ones_refused(profiles: ProfileRegistry) -> None:
    with pytest.raises(ValueError):
        Command("fan_speed", 101)
    with pytest.raises(ValueError):
        Command("power", 1)
    with pytest.raises(ValueError):
        Command("brightness", True)
    relay = DeviceCodec(profiles["tasmota-relay"], "pump")
    assert not relay.supports("fan_speed")
    with pytest.raises(ValueError, match="no fan_speed command"):
        relay.encode(Command("fan_speed", 50))


@pytest.mark.parametrize("levels", [1, 2, 3, 4, 5, 10, 100, 255])
def test_percent_and_levels_round_trip(levels: int) -> None:
    for level in range(levels + 1):
        percent = level_to_percent(level, levels)
        assert (percent == 0) == (level == 0)
        if levels <= 100:
            assert percent_to_level(percent, levels) == level
    for percent in range(101):
        level = percent_to_level(percent, levels)
        assert 0 <= level <= levels
        assert (level == 0) == (percent == 0)


def test_serial_reading_and_command_strings(profiles: ProfileRegistry) -> None:
    ph = SerialCodec(profiles["atlas-ezo-ph"])
    assert ph.read_command == "R"
    assert ph.calibration_command("mid") == "Cal,mid,7.00"
    assert ph.calibration_command("high", 10.05) == "Cal,high,10.05"
    with pytest.raises(ValueError, match="outside"):
        ph.calibration_command("mid", 4.0)
    with pytest.raises(KeyError):
        ph.calibration_command("dry")
    with pytest.raises(ValueError):
        ph.temperature_command(float("nan"))
    [reading] = ph.decode_line("6.875\r").measurements
    assert (reading.metric, reading.value, reading.unit) == ("ph", 6.875, "pH")
    with pytest.raises(ValueError, match="not a serial profile"):
        SerialCodec(profiles["tasmota-sht3x"])


def test_serial_profiles_carry_what_the_serial_driver_needs(profiles: ProfileRegistry) -> None:
    for name in ("atlas-ezo-ph", "atlas-ezo-ec"):
        serial = profiles[name].serial
        assert serial is not None
        assert (serial.baudrate, serial.terminator, serial.read_command) == (9600, "\r", "R")
        assert (serial.ok_response, serial.error_response) == ("*OK", "*ER")
        assert "C,0" in serial.init_commands
        calibration = profiles[name].calibration
        assert calibration is not None and calibration.performed_by == "device"
        assert calibration.query_command == "Cal,?"
