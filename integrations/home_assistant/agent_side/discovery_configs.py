"""Home Assistant MQTT discovery messages for one device (no I/O).

Each sensor metric becomes a ``sensor`` entity, each actuator one ``fan``, ``light``, ``switch``
(pumps) or ``valve`` entity, under ``<prefix>/<component>/<unique_id>/config``. The agent is the
entities' MQTT side: it publishes their state on its own topics (``<base>/<device_id>/<field>``,
plain values) and takes commands on ``<base>/<device_id>/<command>/set``, so every command goes
through the agent's confirmed command path. Availability is the agent's own status topic and the
device's LWT topic, both of which must say online.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.devices.profiles import CommandKind, FirmwareProfile

__all__ = [
    "OFF",
    "ON",
    "DiscoveryTopics",
    "command_topics",
    "device_configs",
]

ON = "ON"
OFF = "OFF"

# Metric names (as the firmware profiles name them) to Home Assistant sensor device classes.
_DEVICE_CLASSES: dict[str, str] = {
    "temperature": "temperature",
    "water_temperature": "temperature",
    "dew_point": "temperature",
    "humidity": "humidity",
    "ph": "ph",
    "co2": "carbon_dioxide",
    "illuminance": "illuminance",
    "pressure": "pressure",
    "power": "power",
    "energy": "energy",
    "voltage": "voltage",
    "current": "current",
}

_COMPONENTS: dict[str, str] = {"fan": "fan", "light": "light", "pump": "switch", "valve": "valve"}


@dataclass(frozen=True)
class DiscoveryTopics:
    """Where discovery goes (``prefix``) and where the agent's entity topics live (``base``)."""

    prefix: str = "homeassistant"
    base: str = "farm-agent"

    @property
    def agent_status(self) -> str:
        """The agent's own availability (its MQTT birth and will)."""
        return f"{self.base}/status"

    @property
    def hub_status(self) -> str:
        """Where Home Assistant says it (re)started."""
        return f"{self.prefix}/status"

    def state(self, device_id: str, field: str) -> str:
        """The agent's state topic for one metric or state field of a device."""
        return f"{self.base}/{device_id}/{field}"

    def command(self, device_id: str, kind: str) -> str:
        """The topic Home Assistant sends one kind of command to."""
        return f"{self.base}/{device_id}/{kind}/set"

    def config(self, component: str, unique_id: str) -> str:
        """The discovery config topic of one entity."""
        return f"{self.prefix}/{component}/{unique_id}/config"


def command_topics(
    topics: DiscoveryTopics, device_id: str, kind: str, profile: FirmwareProfile
) -> dict[str, CommandKind]:
    """The command topics of an actuator, each with the command kind it carries."""
    if kind not in _COMPONENTS:
        return {}
    return {topics.command(device_id, command): command for command in profile.commands}


def device_configs(
    topics: DiscoveryTopics,
    *,
    device_id: str,
    name: str,
    kind: str,
    profile: FirmwareProfile,
    lwt: tuple[str, str, str] | None,
    origin: Mapping[str, str],
) -> dict[str, dict[str, Any]]:
    """The discovery config of every entity of a device, by config topic.

    ``lwt`` is the device's rendered status topic with its online and offline payloads.
    """
    device = {
        "identifiers": [f"farm_{device_id}"],
        "name": name,
        "manufacturer": profile.firmware,
        "model": profile.name,
    }
    availability: list[dict[str, str]] = [
        {
            "topic": topics.agent_status,
            "payload_available": "online",
            "payload_not_available": "offline",
        }
    ]
    if lwt is not None:
        topic, online, offline = lwt
        status = {"topic": topic, "payload_available": online, "payload_not_available": offline}
        path = profile.availability.path if profile.availability is not None else None
        if path is not None:  # a JSON status (zigbee2mqtt's {"state": "online"})
            status["value_template"] = "{{ value_json." + path + " }}"
        availability.append(status)
    common = {
        "device": device,
        "origin": dict(origin),
        "availability": availability,
        "availability_mode": "all",
    }
    configs: dict[str, dict[str, Any]] = {}
    for metric in profile.metrics:
        unique_id = f"farm_{device_id}_{metric.name}"
        config: dict[str, Any] = {
            **common,
            "name": metric.name.replace("_", " ").capitalize(),
            "unique_id": unique_id,
            "object_id": unique_id,
            "state_topic": topics.state(device_id, metric.name),
            "unit_of_measurement": metric.unit,
            "state_class": "measurement",
            "suggested_display_precision": metric.decimals,
        }
        device_class = _DEVICE_CLASSES.get(metric.name)
        if device_class is not None:
            config["device_class"] = device_class
        configs[topics.config("sensor", unique_id)] = config
    component = _COMPONENTS.get(kind)
    if component is not None and profile.commands:
        unique_id = f"farm_{device_id}_{kind}"
        config = {**common, "name": None, "unique_id": unique_id, "object_id": unique_id}
        config.update(_actuator(topics, device_id, component, set(profile.commands)))
        configs[topics.config(component, unique_id)] = config
    return configs


def _actuator(
    topics: DiscoveryTopics, device_id: str, component: str, commands: set[str]
) -> dict[str, Any]:
    """The state and command topics of an actuator entity."""

    def state(field: str) -> str:
        return topics.state(device_id, field)

    def command(kind: str) -> str:
        return topics.command(device_id, kind)

    switch = "power" if "power" in commands else "valve" if "valve" in commands else None
    if component == "fan":
        config: dict[str, Any] = {"payload_on": ON, "payload_off": OFF}
        if switch is not None:
            config.update(state_topic=state(switch), command_topic=command(switch))
        else:
            # A speed-only fan (Sonoff iFan): on/off is speed 100 %/0 %, its state speed > 0.
            config.update(
                state_topic=state("fan_speed"),
                state_value_template="{{ 'ON' if value | int(0) > 0 else 'OFF' }}",
                command_topic=command("fan_speed"),
            )
        if "fan_speed" in commands:
            config.update(
                percentage_state_topic=state("fan_speed"),
                percentage_command_topic=command("fan_speed"),
                speed_range_min=1,
                speed_range_max=100,
            )
        return config
    if component == "light":
        config = {"payload_on": ON, "payload_off": OFF}
        if switch is not None:
            config.update(state_topic=state(switch), command_topic=command(switch))
        else:
            config.update(
                on_command_type="brightness",
                state_topic=state("brightness"),
                state_value_template="{{ 'ON' if value | int(0) > 0 else 'OFF' }}",
                command_topic=command("brightness"),
            )
        if "brightness" in commands:
            config.update(
                brightness_state_topic=state("brightness"),
                brightness_command_topic=command("brightness"),
                brightness_scale=100,
            )
        return config
    field = switch or "power"
    if component == "valve":
        return {
            "state_topic": state(field),
            "command_topic": command(field),
            "payload_open": ON,
            "payload_close": OFF,
            "state_open": ON,
            "state_closed": OFF,
            "device_class": "water",
        }
    return {
        "state_topic": state(field),
        "command_topic": command(field),
        "payload_on": ON,
        "payload_off": OFF,
        "device_class": "switch",
    }
