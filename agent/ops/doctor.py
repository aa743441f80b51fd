"""``farm-agent doctor``: checks a site and says what to fix.

Each check gives a :class:`Finding`; a ``fail`` makes the command exit non-zero. The checks
only read: the broker gets a connection under its own client id (never the agent's, whose
persistent session holds queued readings), the database is opened read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import stat
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiohttp
import aiomqtt

from agent.ops.salvage import damage
from agent.settings import DEFAULT_CONFIG_FILE, AgentSettings
from agent.sync.link import CloudLink

__all__ = ["Finding", "diagnose", "render"]

Status = Literal["ok", "warn", "fail"]
_TIMEOUT_S = 5.0
_PORT_GLOBS = ("ttyUSB*", "ttyACM*", "ttyAMA*", "serial*")


@dataclass(frozen=True)
class Finding:
    """One check's verdict and, when it is not ok, what to do."""

    check: str
    status: Status
    detail: str
    fix: str = ""


async def diagnose(
    settings: AgentSettings, config_file: Path = DEFAULT_CONFIG_FILE
) -> list[Finding]:
    """Run every check."""
    found = [_settings(config_file), _state_dir(settings), _disk(settings)]
    found.append(await asyncio.to_thread(_database, settings))
    found.extend(await asyncio.to_thread(_serial_ports, settings))
    found.append(await _broker(settings))
    found.append(await asyncio.to_thread(_clock))
    found.append(await _cloud(settings))
    return found


def render(findings: list[Finding]) -> str:
    """One line a check, with the fix indented under it."""
    lines = []
    for item in findings:
        lines.append(f"{item.status.upper():4}  {item.check:9} {item.detail}")
        if item.fix:
            lines.append(f"      {'':9} fix: {item.fix}")
    return "\n".join(lines)


def _settings(config_file: Path) -> Finding:
    if config_file.exists():
        return Finding("settings", "ok", f"valid ({config_file} and FARM_* variables)")
    return Finding("settings", "ok", f"valid (defaults and FARM_* variables; no {config_file})")


def _state_dir(settings: AgentSettings) -> Finding:
    state = settings.state_dir
    if not state.exists():
        return Finding("state", "warn", f"{state} does not exist yet", "the agent creates it")
    if not os.access(state, os.W_OK | os.X_OK):
        return Finding(
            "state",
            "fail",
            f"{state} is not writable by this user",
            "run the doctor as the agent's user: sudo -u farm-agent farm-agent doctor",
        )
    return Finding("state", "ok", str(state))


def _disk(settings: AgentSettings) -> Finding:
    where = settings.state_dir if settings.state_dir.exists() else settings.state_dir.parent
    free = shutil.disk_usage(where if where.exists() else Path.cwd()).free
    detail = f"{free // (1024 * 1024)} MiB free"
    if free < settings.disk_low_free_bytes:
        return Finding(
            "disk",
            "fail",
            detail + " (under the low-disk watermark)",
            "free space, or lower FARM_RETENTION_RAW_DAYS; a larger card",
        )
    return Finding("disk", "ok", detail)


def _database(settings: AgentSettings) -> Finding:
    path = settings.database_path
    if not path.exists():
        return Finding("database", "ok", "none yet (created at the first start)")
    problems = damage(path)
    if problems:
        return Finding(
            "database",
            "fail",
            f"{path} is damaged: {problems[0]}",
            "copy the state directory aside; the agent salvages it at start-up"
            " (or farm-agent restore a backup)",
        )
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    return Finding("database", "ok", f"{path} passes quick_check (schema {version})")


def _registered_ports(settings: AgentSettings) -> list[str]:
    # Read-only and without the store: the store's open would migrate a database the doctor
    # must not change.
    path = settings.database_path
    if not path.exists():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            # DISTINCT: the Modbus devices of one RS-485 bus share its port.
            rows = conn.execute(
                "SELECT DISTINCT serial_port FROM devices WHERE serial_port IS NOT NULL"
            )
            return [str(row[0]) for row in rows]
    except sqlite3.DatabaseError:
        return []


def _serial_ports(settings: AgentSettings) -> list[Finding]:
    if not settings.serial_enabled:
        return [Finding("serial", "ok", "disabled (FARM_SERIAL_ENABLED=false)")]
    registered = _registered_ports(settings)
    present = sorted(str(p) for pattern in _PORT_GLOBS for p in Path("/dev").glob(pattern))
    found = []
    for port in registered:
        if "://" in port:
            continue  # a pyserial URL (socket://...), not a device file
        device = Path(port)
        if not device.exists():
            found.append(
                Finding(
                    "serial",
                    "fail",
                    f"{port} (registered) does not exist",
                    f"plug the sensor in, or change the device's port (present: {present})",
                )
            )
        elif not stat.S_ISCHR(device.stat().st_mode) and not device.is_symlink():
            found.append(Finding("serial", "warn", f"{port} is not a character device"))
        elif not os.access(device, os.R_OK | os.W_OK):
            found.append(
                Finding(
                    "serial",
                    "fail",
                    f"{port}: no read/write permission for this user",
                    "add the user to the dialout group: sudo usermod -aG dialout farm-agent",
                )
            )
        else:
            found.append(Finding("serial", "ok", f"{port} (registered) can be opened"))
    if not found:
        shown = ", ".join(present) if present else "none"
        found.append(
            Finding("serial", "ok", f"no serial device registered; ports present: {shown}")
        )
    return found


async def _broker(settings: AgentSettings) -> Finding:
    if not settings.mqtt_enabled:
        return Finding("broker", "ok", "disabled (FARM_MQTT_ENABLED=false)")
    where = f"{settings.mqtt_host}:{settings.mqtt_port}"
    password = settings.mqtt_password.get_secret_value() if settings.mqtt_password else None
    client = aiomqtt.Client(
        settings.mqtt_host,
        settings.mqtt_port,
        identifier=f"farm-agent-doctor-{uuid.uuid4().hex[:8]}",  # never the agent's own
        username=settings.mqtt_username,
        password=password,
        timeout=_TIMEOUT_S,
    )
    try:
        async with asyncio.timeout(_TIMEOUT_S * 2), client:
            pass
    except aiomqtt.MqttCodeError as err:
        return Finding(
            "broker",
            "fail",
            f"{where} refused the connection: {err}",
            "check FARM_MQTT_USERNAME / FARM_MQTT_PASSWORD against the broker's password file",
        )
    except (aiomqtt.MqttError, OSError, TimeoutError) as err:
        return Finding(
            "broker",
            "fail",
            f"no MQTT broker answers at {where} ({err})",
            "sudo apt install mosquitto && sudo systemctl enable --now mosquitto,"
            " or set FARM_MQTT_HOST / FARM_MQTT_PORT",
        )
    return Finding("broker", "ok", f"MQTT broker at {where} accepts connections")


def _clock() -> Finding:
    try:
        result = subprocess.run(
            ["timedatectl", "show", "--property=NTPSynchronized", "--value"],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        result = None
    if result is None or result.returncode != 0:
        return Finding(
            "clock",
            "warn",
            "cannot tell whether the clock is synchronised (no timedatectl)",
            "readings and schedules need the right time: enable systemd-timesyncd or chrony",
        )
    if result.stdout.strip() == "yes":
        return Finding("clock", "ok", "synchronised by NTP")
    return Finding(
        "clock",
        "fail",
        "not synchronised by NTP",
        "sudo timedatectl set-ntp true (a Pi has no battery clock: it needs the network time)",
    )


async def _cloud(settings: AgentSettings) -> Finding:
    try:
        link = CloudLink.load(settings.state_dir)
    except (OSError, ValueError, TypeError) as err:
        return Finding(
            "cloud",
            "fail",
            f"the cloud link file cannot be read: {err}",
            "pair again: farm-agent pair --cloud URL --code CODE",
        )
    if link is None:
        return Finding("cloud", "ok", "not paired (the agent works standalone)")
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(link.cloud_url.rstrip("/") + "/health") as resp,
        ):
            healthy = resp.status == 200
    except (aiohttp.ClientError, TimeoutError) as err:
        return Finding(
            "cloud",
            "warn",
            f"{link.cloud_url} does not answer ({err})",
            "the agent keeps working and syncs when the link is back",
        )
    if not healthy:
        return Finding("cloud", "warn", f"{link.cloud_url}/health answered {resp.status}")
    return Finding("cloud", "ok", f"paired as {link.agent_id}; {link.cloud_url} answers")
