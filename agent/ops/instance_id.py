"""The agent's own name on its machine: a random id kept in its state directory.

Where two agents meet (one MQTT broker), names derived from it differ between agents and stay
the same across restarts of one, as a broker's persistent session needs.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from agent.settings import AgentSettings

__all__ = ["instance_id", "mqtt_client_id"]

_FILE = "instance-id"


def instance_id(state_dir: Path) -> str:
    """The id kept in ``state_dir`` (32 hexadecimal digits), made there on the first call."""
    path = state_dir / _FILE
    try:
        return uuid.UUID(path.read_text(encoding="ascii").strip()).hex
    except (FileNotFoundError, ValueError):
        pass  # none yet, or not one we wrote: make a new one
    made = uuid.uuid4().hex
    state_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{_FILE}.{os.getpid()}")
    partial.write_text(made + "\n", encoding="ascii")
    os.replace(partial, path)
    return made


def mqtt_client_id(settings: AgentSettings) -> str:
    """``FARM_MQTT_CLIENT_ID`` when set, else ``farm-agent-`` and the start of the instance id.

    A broker closes a connection when another one comes with its client id: two agents with
    one fixed id knocked each other off for as long as both ran."""
    if settings.mqtt_client_id is not None:
        return settings.mqtt_client_id
    return f"farm-agent-{instance_id(settings.state_dir)[:12]}"
