"""``farm-agent install`` / ``uninstall``: the system user, the unit, the configuration file.

Everything goes through systemd's own offline-capable tools (``systemd-sysusers``, ``systemctl
--root``), so the same code installs on a Pi and into a directory tree a test inspects.
Uninstalling keeps the data (``/var/lib/farm-agent``), the configuration and the user.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import SecretStr

from agent.ops.units import UNIT_NAME, render_agent_unit
from agent.settings import AgentSettings

__all__ = ["InstallError", "Runner", "config_template", "install", "run_command", "uninstall"]

SYSUSERS = """\
# The farm agent's system user; serial sensors need the dialout group.
u farm-agent - "Vertical farm agent" /var/lib/farm-agent /usr/sbin/nologin
m farm-agent dialout
"""
_UNIT_DIR = Path("etc/systemd/system")
_SYSUSERS_FILE = Path("etc/sysusers.d/farm-agent.conf")
_CONFIG_FILE = Path("etc/farm-agent/agent.toml")
STATE_DIR = "/var/lib/farm-agent"
# Written as an active line above the commented ones.
_SET_BY_UNIT = {"state_dir"}

Runner = Callable[[Sequence[str]], None]


class InstallError(Exception):
    """Installation stopped; the message says what to fix."""


def run_command(args: Sequence[str]) -> None:
    """Run a system tool; a failure is an :class:`InstallError` with its output."""
    try:
        result = subprocess.run(
            list(args), capture_output=True, text=True, timeout=120, check=False
        )
    except FileNotFoundError as err:
        raise InstallError(f"{args[0]} is missing: is this a systemd system?") from err
    if result.returncode != 0:
        raise InstallError(f"{' '.join(args)} failed: {result.stderr.strip()}")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, SecretStr):
        return '"..."'
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_template() -> str:
    """A commented agent.toml: every setting with its meaning and default, all commented out."""
    lines = [
        '# /etc/farm-agent/agent.toml: the farm agent\'s settings (README "Configuration").',
        "# Uncomment a line to change it; FARM_* environment variables override this file.",
        "# Restart after a change: sudo systemctl restart farm-agent",
        "",
        "# Where the database and keys live: the unit's StateDirectory=, so that farm-agent",
        "# backup, restore, pair and doctor find the service's state without --state-dir.",
        f'state_dir = "{STATE_DIR}"',
        "",
    ]
    for name, field in AgentSettings.model_fields.items():
        if name in _SET_BY_UNIT:
            continue
        shown = '"..."' if field.default is None else _toml_value(field.default)
        lines += [f"# {field.description}", f"# {name} = {shown}", ""]
    text = "\n".join(lines)
    tomllib.loads(text)  # a valid document: one setting, the rest commented out
    return text


def _systemctl(root: Path, *args: str) -> list[str]:
    return ["systemctl", *([] if root == Path("/") else [f"--root={root}"]), *args]


def install(root: Path, executable: Path, *, start: bool, run: Runner = run_command) -> list[str]:
    """Install under ``root`` (``/`` on a Pi); return what was done, line by line."""
    if root == Path("/") and os.geteuid() != 0:
        raise InstallError("run as root: sudo farm-agent install")
    if not executable.is_file():
        raise InstallError(f"{executable} does not exist")
    home = executable.is_relative_to("/home") or executable.is_relative_to("/root")
    if home and root == Path("/"):
        raise InstallError(
            f"{executable} is under a home directory, which the unit hides (ProtectHome=);"
            " install with PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin pipx install ..."
        )
    done = []
    sysusers = root / _SYSUSERS_FILE
    sysusers.parent.mkdir(parents=True, exist_ok=True)
    sysusers.write_text(SYSUSERS)
    run(["systemd-sysusers", *([] if root == Path("/") else [f"--root={root}"]), str(sysusers)])
    done.append("user farm-agent (groups farm-agent, dialout)")
    config = root / _CONFIG_FILE
    if config.exists():
        done.append(f"kept {config}")
    else:
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(config_template())
        config.chmod(0o640)  # it may hold the SMTP password and the metrics token
        if root == Path("/"):
            import grp

            os.chown(config, 0, grp.getgrnam("farm-agent").gr_gid)
        done.append(f"wrote {config}")
    unit = root / _UNIT_DIR / UNIT_NAME
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(render_agent_unit(str(executable)))
    done.append(f"wrote {unit}")
    if root == Path("/"):
        run(_systemctl(root, "daemon-reload"))
    run(_systemctl(root, "enable", *(["--now"] if start and root == Path("/") else []), UNIT_NAME))
    done.append("enabled farm-agent.service" + (" and started it" if start else ""))
    return done


def uninstall(root: Path, *, run: Runner = run_command) -> list[str]:
    """Stop and remove the service; keep the data, the configuration and the user."""
    if root == Path("/") and os.geteuid() != 0:
        raise InstallError("run as root: sudo farm-agent uninstall")
    unit = root / _UNIT_DIR / UNIT_NAME
    done = []
    if unit.exists():
        run(_systemctl(root, "disable", *(["--now"] if root == Path("/") else []), UNIT_NAME))
        unit.unlink()
        done.append(f"stopped, disabled and removed {unit}")
        if root == Path("/"):
            run(_systemctl(root, "daemon-reload"))
    else:
        done.append("farm-agent.service was not installed")
    done.append(
        f"kept {root / 'var/lib/farm-agent'} (data), {root / _CONFIG_FILE} and the farm-agent user"
    )
    return done
