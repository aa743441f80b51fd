"""zigbee2mqtt's bridge, as far as the simulated Zigbee devices need it: the retained
``zigbee2mqtt/bridge/devices`` list, each device with the ``exposes`` its profile reads
(https://www.zigbee2mqtt.io/guide/usage/mqtt_topics_and_messages.html#zigbee2mqtt-bridge-devices)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from agent.devices.profiles import FirmwareProfile

__all__ = ["bridge_devices"]


def bridge_devices(devices: Iterable[tuple[str, FirmwareProfile]]) -> list[dict[str, Any]]:
    """The bridge/devices payload for (friendly name, profile) pairs, coordinator first."""
    listed: list[dict[str, Any]] = [
        {
            "ieee_address": "0x00124b0012345678",
            "type": "Coordinator",
            "network_address": 0,
            "friendly_name": "Coordinator",
            "supported": True,
            "disabled": False,
            "interview_completed": True,
            "definition": None,
        }
    ]
    for name, profile in devices:
        ieee = f"0x00158d00{zlib.crc32(name.encode()):08x}"
        listed.append(
            {
                "ieee_address": ieee,
                "type": "Router" if profile.commands else "EndDevice",
                "network_address": zlib.crc32(ieee.encode()) & 0xFFFF,
                "friendly_name": name,
                "supported": True,
                "disabled": False,
                "interview_completed": True,
                "definition": {
                    "model": "SIM-" + profile.kind.upper(),
                    "vendor": "Simulated",
                    "description": profile.name,
                    "exposes": _exposes(profile),
                    "options": [],
                },
            }
        )
    return listed


def _exposes(profile: FirmwareProfile) -> list[dict[str, Any]]:
    exposes: list[dict[str, Any]] = []
    states = profile.state_fields
    if "brightness" in states:
        exposes.append({"type": "light", "features": [_state(), _brightness()]})
    elif "power" in states:
        exposes.append({"type": "switch", "features": [_state()]})
    for metric in profile.metrics:
        prop = metric.path[-1] if metric.path else metric.name
        exposes.append(
            {
                "type": "numeric",
                "name": prop,
                "property": prop,
                "access": 1,
                "unit": metric.unit,
                "label": metric.name.replace("_", " ").capitalize(),
            }
        )
    exposes.append(
        {
            "type": "numeric",
            "name": "linkquality",
            "property": "linkquality",
            "access": 1,
            "unit": "lqi",
            "value_min": 0,
            "value_max": 255,
        }
    )
    return exposes


def _state() -> dict[str, Any]:
    return {
        "type": "binary",
        "name": "state",
        "property": "state",
        "access": 7,
        "value_on": "ON",
        "value_off": "OFF",
        "value_toggle": "TOGGLE",
    }


def _brightness() -> dict[str, Any]:
    return {
        "type": "numeric",
        "name": "brightness",
        "property": "brightness",
        "access": 7,
        "value_min": 0,
        "value_max": 254,
    }
