"""What makes a registration valid against the loaded firmware profiles.

A device's kind must be one its profile is for (a relay profile switches pumps, valves and
lights), its device_type one that a profile of that kind declares (or the kind itself for
actuators), and its address must be on the profile's transport with variables the profile has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.devices.profiles import FirmwareProfile, ProfileRegistry
from protocol.errors import FieldIssue, ValidationFailed
from protocol.schemas.devices import ModbusAddress, MqttAddress, SerialAddress

__all__ = ["Registration", "device_types", "profile_fits", "resolve_registration"]

# Tasmota's relay firmware drives anything switched on and off (its profile: tasmota-relay.toml).
_RELAY_KINDS = frozenset({"pump", "valve", "light"})
_OFFSET_SUFFIX = "_offset"


def profile_fits(profile: FirmwareProfile, kind: str) -> bool:
    """Whether a device of ``kind`` may use ``profile``."""
    return profile.kind == kind or (profile.kind == "relay" and kind in _RELAY_KINDS)


def device_types(profiles: ProfileRegistry, kind: str) -> set[str]:
    """The device types known for ``kind``: those its profiles declare, and the kind itself
    for actuators (a fan's device_type is ``fan`` unless a profile says otherwise)."""
    types = {
        profile.device_type
        for profile in profiles.values()
        if profile.device_type is not None and profile_fits(profile, kind)
    }
    if kind != "sensor":
        types.add(kind)
    return types


@dataclass(frozen=True)
class Registration:
    """A checked registration: the device columns and offsets to apply from the start."""

    columns: dict[str, Any]
    initial_offsets: dict[str, float] = field(default_factory=dict)


def resolve_registration(
    profiles: ProfileRegistry,
    body: Mapping[str, Any],
    address: MqttAddress | SerialAddress | ModbusAddress | None,
) -> Registration:
    """Check ``body`` (a registration's fields) against the profiles; 422 naming each problem."""
    issues = list(_issues(profiles, body, address))
    if issues:
        raise ValidationFailed.of(issues)
    kind = body["kind"]
    profile = profiles[body["profile"]] if body.get("profile") else None
    columns: dict[str, Any] = {
        "farm_id": str(body["farm_id"]),
        "name": body["name"],
        "kind": kind,
        "device_type": _device_type(body, profile),
        "location": body.get("location") or "",
        "profile": body.get("profile"),
        "mac_address": body.get("mac_address"),
        "firmware_version": body.get("firmware_version"),
        "battery_level": body.get("battery_level"),
        "calibration_data": json.dumps(body.get("calibration_data") or {}),
        "max_speed": body.get("max_speed"),
        "rated_power_w": body.get("rated_power_w"),
    }
    if isinstance(address, MqttAddress):
        columns.update(
            transport="mqtt",
            topic_base=address.topic_base,
            topic_variables=json.dumps(address.variables),
        )
    elif isinstance(address, SerialAddress):
        settings = address.model_dump(exclude={"transport", "port"}, exclude_none=True)
        columns.update(
            transport="serial", serial_port=address.port, serial_settings=json.dumps(settings)
        )
    elif isinstance(address, ModbusAddress):
        # Devices of one bus share its port (or TCP endpoint): unique with the unit id.
        settings = address.model_dump(exclude={"transport"}, exclude_none=True)
        columns.update(
            transport="modbus", serial_port=address.bus, serial_settings=json.dumps(settings)
        )
    offsets: dict[str, float] = {}
    if profile is not None:
        metrics = {metric.name for metric in profile.metrics}
        for key, value in (body.get("calibration_data") or {}).items():
            metric = key.removesuffix(_OFFSET_SUFFIX)
            if key.endswith(_OFFSET_SUFFIX) and metric in metrics:
                offsets[metric] = float(value)
    return Registration(columns, offsets)


def _device_type(body: Mapping[str, Any], profile: FirmwareProfile | None) -> str | None:
    given: str | None = body.get("device_type")
    if given is not None:
        return given
    if profile is not None and profile.device_type is not None:
        return profile.device_type
    return None if body["kind"] == "sensor" else str(body["kind"])


def _issues(
    profiles: ProfileRegistry,
    body: Mapping[str, Any],
    address: MqttAddress | SerialAddress | ModbusAddress | None,
) -> Iterator[FieldIssue]:
    kind: str = body["kind"]
    profile_id: str | None = body.get("profile")
    profile: FirmwareProfile | None = None
    if profile_id is not None:
        if profile_id not in profiles:
            yield "profile", f"unknown firmware profile; known: {', '.join(profiles)}"
        else:
            profile = profiles[profile_id]
            if not profile_fits(profile, kind):
                yield "profile", f"profile {profile_id} is for {profile.kind} devices, not {kind}"
                profile = None
    yield from _device_type_issues(profiles, body, profile)
    if profile is not None and address is not None:
        yield from _address_issues(profile, address)
    if profile is not None:
        metrics = {metric.name for metric in profile.metrics}
        for key in body.get("calibration_data") or {}:
            metric = key.removesuffix(_OFFSET_SUFFIX)
            if key.endswith(_OFFSET_SUFFIX) and metric not in metrics:
                yield (
                    f"calibration_data.{key}",
                    f"profile {profile.id} reports no metric {metric!r};"
                    f" it reports {', '.join(sorted(metrics))}",
                )
    if body.get("max_speed") is not None and kind != "fan":
        yield "max_speed", "only fans have a maximum speed"
    if body.get("rated_power_w") is not None and kind == "sensor":
        yield "rated_power_w", "only actuators have a rated power"


def _device_type_issues(
    profiles: ProfileRegistry, body: Mapping[str, Any], profile: FirmwareProfile | None
) -> Iterator[FieldIssue]:
    kind: str = body["kind"]
    device_type = _device_type(body, profile)
    known = ", ".join(sorted(device_types(profiles, kind)))
    if device_type is None:
        yield "device_type", f"required for sensors; known: {known}"
    elif device_type not in device_types(profiles, kind):
        yield "device_type", f"unknown device_type {device_type!r} for kind {kind}; known: {known}"
    elif profile is not None and profile.device_type not in (None, device_type):
        yield (
            "device_type",
            f"profile {profile.id} is a {profile.device_type} firmware, not {device_type}",
        )


def _address_issues(
    profile: FirmwareProfile, address: MqttAddress | SerialAddress | ModbusAddress
) -> Iterator[FieldIssue]:
    if address.transport != profile.transport:
        yield (
            "address.transport",
            f"profile {profile.id} speaks {profile.transport}, not {address.transport}",
        )
        return
    if isinstance(address, MqttAddress):
        unknown = set(address.variables) - set(profile.variables)
        if unknown:
            known = ", ".join(sorted(profile.variables)) or "none"
            yield (
                "address.variables",
                f"profile {profile.id} has no variables {sorted(unknown)}; it has {known}",
            )
