"""Registry rows as the API shows them: the device, the sensor device, the fan."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from agent.devices.profiles import FirmwareProfile
from agent.store.devices import is_running
from protocol.schemas.devices import (
    Device,
    Fan,
    ModbusAddress,
    MqttAddress,
    SensorDevice,
    SerialAddress,
)
from protocol.timefmt import parse_iso

__all__ = ["calibration_summary", "device_view", "fan_view", "sensor_device_view"]

_FULL_SPEED = 100


def calibration_summary(
    stored: Mapping[str, Any], active: Iterable[sqlite3.Row]
) -> dict[str, bool | float | str]:
    """The registration's calibration data updated with what is in force now.

    An agent-side calibration shows as ``<metric>_offset`` (and ``<metric>_slope`` for a
    linear fit); an on-device one as ``<metric>_calibrated_on_device``; ``calibrated_at`` is
    the latest of them.
    """
    summary: dict[str, bool | float | str] = dict(stored)
    latest = ""
    for row in active:
        metric = row["metric"]
        if row["method"] == "on_device":
            summary[f"{metric}_calibrated_on_device"] = True
            summary.pop(f"{metric}_offset", None)
        else:
            summary[f"{metric}_offset"] = float(row["offset"])
            if row["method"] == "agent_linear":
                summary[f"{metric}_slope"] = float(row["slope"])
        latest = max(latest, row["performed_at"])
    if latest:
        summary["calibrated_at"] = latest
    return summary


def _address(
    row: sqlite3.Row, profile: FirmwareProfile | None
) -> MqttAddress | SerialAddress | ModbusAddress | None:
    if row["transport"] == "mqtt":
        return MqttAddress(
            transport="mqtt",
            topic_base=row["topic_base"],
            variables=json.loads(row["topic_variables"]),
        )
    if row["transport"] == "serial":
        # Shown with the profile's line settings where the registration left them out.
        settings: dict[str, Any] = {}
        if profile is not None and profile.serial is not None:
            line = profile.serial
            settings = {
                "baudrate": line.baudrate,
                "bytesize": line.bytesize,
                "parity": line.parity,
                "stopbits": line.stopbits,
            }
        settings.update(json.loads(row["serial_settings"]))
        return SerialAddress(transport="serial", port=row["serial_port"], **settings)
    if row["transport"] == "modbus":
        return ModbusAddress.model_validate(
            {"transport": "modbus", **json.loads(row["serial_settings"])}
        )
    return None


def device_view(
    row: sqlite3.Row, active: Iterable[sqlite3.Row], profile: FirmwareProfile | None
) -> Device:
    """Every registry field of a device; ``profile`` (if loaded) fills in default settings."""
    return Device(
        id=row["id"],
        farm_id=row["farm_id"],
        name=row["name"],
        kind=row["kind"],
        device_type=row["device_type"],
        location=row["location"],
        status=row["status"],
        admin_status=row["admin_status"],
        profile=row["profile"],
        address=_address(row, profile),
        mac_address=row["mac_address"],
        firmware_version=row["firmware_version"],
        battery_level=row["battery_level"],
        calibration_data=calibration_summary(json.loads(row["calibration_data"]), active),
        state=json.loads(row["state"]),
        max_speed=row["max_speed"],
        rated_power_w=row["rated_power_w"],
        last_reading=row["last_reading"],
        last_seen=row["last_seen"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def sensor_device_view(row: sqlite3.Row, active: Iterable[sqlite3.Row]) -> SensorDevice:
    """The sensor device fields of the API (docs/design.md section 12)."""
    return SensorDevice(
        id=row["id"],
        name=row["name"],
        device_type=row["device_type"],
        farm_id=row["farm_id"],
        location=row["location"],
        status=row["status"],
        last_reading=row["last_reading"],
        battery_level=row["battery_level"],
        firmware_version=row["firmware_version"],
        mac_address=row["mac_address"],
        calibration_data=calibration_summary(json.loads(row["calibration_data"]), active),
    )


def fan_view(row: sqlite3.Row, now: datetime) -> Fan:
    """The API's fan fields, from the state the fan last reported.

    Speeds are percentages (``max_speed`` is the cap set at registration, 100 by default).
    ``power_consumption`` is estimated from the rated power with the fan affinity law
    (power grows with the cube of speed); ``runtime_hours`` counts whole hours run, from the
    running time the store accumulates from reported state.
    """
    state: dict[str, bool | int] = json.loads(row["state"])
    running = is_running(state)
    max_speed = row["max_speed"] or _FULL_SPEED
    speed = 0
    if running:
        speed = int(state.get("fan_speed", max_speed))
    status = row["status"]
    if status == "online":
        status = "running" if running else "stopped"
    rated = row["rated_power_w"] or 0.0
    runtime_s = float(row["runtime_s"])
    if row["running_since"] is not None:
        # Counted up to now while the fan reports; while it is silent (offline, or the agent
        # was down) only up to when it was last heard: runtime is what the fan reported.
        until = now
        if row["availability"] != "online":
            heard = [t for t in (row["last_seen"], row["state_updated_at"]) if t is not None]
            until = min(now, parse_iso(max(heard))) if heard else now
        runtime_s += max(0.0, (until - parse_iso(row["running_since"])).total_seconds())
    return Fan(
        id=row["id"],
        name=row["name"],
        farm_id=row["farm_id"],
        location=row["location"],
        status=status,
        current_speed=speed,
        max_speed=max_speed,
        power_consumption=round(rated * (speed / _FULL_SPEED) ** 3, 1),
        runtime_hours=int(runtime_s // 3600),
    )
