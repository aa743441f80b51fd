"""The unit files in systemd/ pass `systemd-analyze verify` and the agent's is rated "OK"."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from agent.ops.units import render_agent_unit
from tests.agent.ops.systemd_tools import systemd_analyze

UNITS = Path(__file__).resolve().parents[3] / "systemd"
# A stand-in for Debian's mosquitto.service, so the drop-in is checked on any machine.
MOSQUITTO_STUB = """[Unit]
Description=Mosquitto MQTT Broker

[Service]
Type=notify
ExecStart=/usr/sbin/mosquitto -c /etc/mosquitto/mosquitto.conf
"""


def _farm_agent_executable() -> str:
    return str(Path(sys.executable).with_name("farm-agent"))


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [systemd_analyze(), "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_agent_unit_as_installed_passes_verify(tmp_path):
    unit = tmp_path / "farm-agent.service"
    unit.write_text(render_agent_unit(_farm_agent_executable()))
    result = _verify(unit)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_shipped_agent_unit_is_rendered_only_in_its_exec_start():
    shipped = (UNITS / "farm-agent.service").read_text()
    rendered = render_agent_unit("/usr/local/bin/farm-agent")
    changed = [
        (a, b) for a, b in zip(shipped.splitlines(), rendered.splitlines(), strict=True) if a != b
    ]
    assert changed == [
        ("ExecStart=/opt/farm-agent/bin/farm-agent run", "ExecStart=/usr/local/bin/farm-agent run")
    ]


def test_cloud_unit_passes_verify(tmp_path):
    unit = tmp_path / "farm-cloud.service"
    text = (UNITS / "farm-cloud.service").read_text()
    unit.write_text(text.replace("/opt/farm-cloud/bin/farm-cloud", _farm_agent_executable()))
    result = _verify(unit)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_mosquitto_drop_in_passes_verify(tmp_path):
    (tmp_path / "mosquitto.service").write_text(MOSQUITTO_STUB)
    drop_ins = tmp_path / "mosquitto.service.d"
    drop_ins.mkdir()
    for each in (UNITS / "mosquitto.service.d").iterdir():
        (drop_ins / each.name).write_text(each.read_text())
    result = _verify(tmp_path / "mosquitto.service")
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_drop_in_check_catches_a_bad_key(tmp_path):
    """The drop-in test above can fail: systemd-analyze reads drop-ins beside the unit."""
    (tmp_path / "mosquitto.service").write_text(MOSQUITTO_STUB)
    (tmp_path / "mosquitto.service.d").mkdir()
    (tmp_path / "mosquitto.service.d" / "bad.conf").write_text("[Service]\nRestartt=always\n")
    assert "Unknown key" in _verify(tmp_path / "mosquitto.service").stderr


def test_agent_unit_is_rated_ok_by_systemd_analyze_security(tmp_path):
    unit = tmp_path / "farm-agent.service"
    unit.write_text(render_agent_unit(_farm_agent_executable()))
    result = subprocess.run(
        [systemd_analyze(), "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = re.search(
        r"Overall exposure level for farm-agent.service: (\d+\.\d+) (\w+)", result.stdout
    )
    assert found, result.stdout + result.stderr
    assert float(found[1]) <= 2.0, result.stdout
    assert found[2] == "OK"
