"""Profiles are validated at start-up; a bad one is an error naming its file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.devices.codec import DeviceCodec
from agent.devices.errors import ProfileError
from agent.devices.profiles import load_profiles
from tests.agent.devices.conftest import PROFILE_DIR

GOOD = (PROFILE_DIR / "generic-json.toml").read_text(encoding="utf-8")


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(directory: Path) -> ProfileError:
    with pytest.raises(ProfileError) as caught:
        load_profiles(directory)
    return caught.value


def test_a_new_firmware_needs_only_a_new_toml_file(tmp_path: Path) -> None:
    for shipped in PROFILE_DIR.glob("*.toml"):
        _write(tmp_path, shipped.stem, shipped.read_text(encoding="utf-8"))
    text = (
        GOOD.replace('id = "generic-json"', 'id = "greenhouse-node"')
        .replace("farm/{base}/telemetry", "greenhouse/{base}/env")
        .replace("sensors.co2_ppm", "co2")
    )
    _write(tmp_path, "greenhouse-node", text)
    registry = load_profiles(tmp_path)
    assert (
        "greenhouse-node" in registry and len(registry) == len(list(PROFILE_DIR.glob("*.toml"))) + 1
    )
    codec = DeviceCodec(registry["greenhouse-node"], "gh-1")
    decoded = codec.decode("greenhouse/gh-1/env", b'{"co2": 612, "sensors": {}}')
    assert [(m.metric, m.value) for m in decoded.measurements] == [("co2", 612.0)]


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (
            ("min = 0.0\nmax = 40000.0", "min = 50.0\nmax = 40.0"),
            "messages[0].metrics[0]",
            "below max",
        ),
        (('unit = "ppm"', 'unit = ""'), "messages[0].metrics[0].unit", "at least 1"),
        (("farm/{base}/telemetry", "farm/{bsae}/telemetry"), "messages[0].topic", "bsae"),
        (('kind = "sensor"', 'kind = "toaster"'), "kind", "sensor"),
        (
            ('time_format = "epoch_s"', 'time_format = "epoch_s"\ncolour = "red"'),
            "messages[0].colour",
            "Extra",
        ),
        (
            ('metrics = ["co2", "temperature", "humidity"]', 'metrics = ["co2", "ph"]'),
            "calibration.metrics",
            "ph",
        ),
        (('transport = "mqtt"', 'transport = "serial"'), "serial", "[serial]"),
        (
            (
                'topic = "farm/{base}/telemetry"\npayload = \'{"ts":1772359200',
                'topic = "farm/{base}/other"\npayload = \'{"ts":1772359200',
            ),
            "golden[0].topic",
            "not a topic",
        ),
    ],
)
def test_invalid_profile_names_file_and_field(
    tmp_path: Path, change: tuple[str, str], field: str, problem: str
) -> None:
    old, new = change
    assert old in GOOD
    path = _write(tmp_path, "generic-json", GOOD.replace(old, new, 1))
    error = _error(tmp_path)
    assert (error.path, error.field) == (str(path), field)
    assert problem in error.problem
    assert str(path) in str(error) and field in str(error)


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken", 'id = "broken"\nname = \n')
    error = _error(tmp_path)
    assert (error.path, error.field) == (str(path), "(toml)")
    assert "line 2" in error.problem


def test_id_must_match_the_file_name_and_be_unique(tmp_path: Path) -> None:
    path = _write(tmp_path, "renamed", GOOD)
    error = _error(tmp_path)
    assert (error.path, error.field) == (str(path), "id")


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    text = GOOD.replace('[[golden]]\nname = "reading"', '[[golden]]\nname = "reading"', 1)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("firmware ="))
    path = _write(tmp_path, "generic-json", text)
    error = _error(tmp_path)
    assert (error.path, error.field) == (str(path), "firmware")


def test_a_profile_without_golden_payloads_is_refused(tmp_path: Path) -> None:
    text = GOOD[: GOOD.index("[[golden]]")]
    path = _write(tmp_path, "generic-json", text)
    error = _error(tmp_path)
    assert (error.path, error.field) == (str(path), "golden")


def test_empty_or_missing_directory_is_an_error(tmp_path: Path) -> None:
    assert _error(tmp_path).field == "(directory)"
    assert _error(tmp_path / "nope").field == "(directory)"


def test_command_payload_placeholders_are_checked(tmp_path: Path) -> None:
    text = (PROFILE_DIR / "tasmota-ifan.toml").read_text(encoding="utf-8")
    path = _write(
        tmp_path, "tasmota-ifan", text.replace('payload = "{level}"', 'payload = "{switch}"')
    )
    error = _error(tmp_path)
    assert (error.path, error.field) == (str(path), "commands.fan_speed.messages[0].payload")
