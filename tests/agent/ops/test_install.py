"""farm-agent install / uninstall into a directory tree (systemd's own tools, offline)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from agent.ops.install import config_template
from agent.settings import AgentSettings
from tests.agent.ops.systemd_tools import systemd_analyze

ROOT = Path(__file__).resolve().parents[3]
FARM_AGENT = Path(sys.executable).with_name("farm-agent")


def farm_agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FARM_AGENT), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_install_puts_user_unit_and_config_in_place_and_uninstall_keeps_the_data(tmp_path):
    systemd_analyze()  # the same systemd tools must be there
    root = tmp_path / "root"
    result = farm_agent("install", "--root", str(root))
    assert result.returncode == 0, result.stderr

    passwd = (root / "etc/passwd").read_text()
    assert "farm-agent:x:" in passwd and ":/var/lib/farm-agent:/usr/sbin/nologin" in passwd
    assert any(
        line.startswith("dialout:") and "farm-agent" in line
        for line in (root / "etc/group").read_text().splitlines()
    )
    unit = root / "etc/systemd/system/farm-agent.service"
    assert f"ExecStart={FARM_AGENT} run" in unit.read_text()
    wanted = root / "etc/systemd/system/multi-user.target.wants/farm-agent.service"
    assert wanted.is_symlink()
    config = root / "etc/farm-agent/agent.toml"
    assert tomllib.loads(config.read_text()) == {"state_dir": "/var/lib/farm-agent"}
    assert config.stat().st_mode & 0o777 == 0o640

    # Data written meanwhile, and a changed configuration, survive uninstall and reinstall.
    (root / "var/lib/farm-agent").mkdir(parents=True)
    (root / "var/lib/farm-agent/agent.db").write_text("data")
    config.write_text("port = 8081\n")
    result = farm_agent("uninstall", "--root", str(root))
    assert result.returncode == 0, result.stderr
    assert not unit.exists() and not wanted.exists()
    assert (root / "var/lib/farm-agent/agent.db").read_text() == "data"
    assert config.read_text() == "port = 8081\n"
    assert farm_agent("install", "--root", str(root)).returncode == 0
    assert config.read_text() == "port = 8081\n"


def test_install_on_the_real_system_needs_root(tmp_path):
    import os

    if os.geteuid() == 0:
        return  # this machine's tests run as root; the message is checked where they do not
    result = farm_agent("install")
    assert result.returncode != 0 and "run as root" in result.stderr


def test_the_config_template_uncommented_gives_the_defaults():
    lines = [
        line[2:]
        for line in config_template().splitlines()
        if line.startswith("# ") and " = " in line and '"..."' not in line
    ]
    values = tomllib.loads("\n".join(lines))
    assert values, "the template shows the settings"
    settings = AgentSettings(**values)
    for name in values:
        default = AgentSettings.model_fields[name].default
        assert getattr(settings, name) == default or str(getattr(settings, name)) == default, name
