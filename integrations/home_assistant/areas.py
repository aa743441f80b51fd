"""Which area each hub entity is in, from Home Assistant's registries.

Home Assistant keeps areas in its registries, not in entity states: an entity's own ``area_id``
or else its device's. The WebSocket commands ``config/area_registry/list``,
``config/device_registry/list`` and ``config/entity_registry/list`` answer them; the
``*_registry_updated`` events say when to ask again.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["REGISTRY_COMMANDS", "REGISTRY_EVENTS", "Area", "areas_of"]

REGISTRY_COMMANDS = (
    "config/area_registry/list",
    "config/device_registry/list",
    "config/entity_registry/list",
)
REGISTRY_EVENTS = ("area_registry_updated", "device_registry_updated", "entity_registry_updated")


class Area(NamedTuple):
    """An area of the hub: its registry id (what an admin maps to a farm) and its name."""

    id: str
    name: str


def _rows(answer: Any) -> list[dict[str, Any]]:
    return [row for row in answer if isinstance(row, dict)] if isinstance(answer, list) else []


def areas_of(areas: Any, devices: Any, entities: Any) -> dict[str, Area]:
    """Entity id -> its area, from the three registry listings (malformed rows are ignored)."""
    names = {
        str(row["area_id"]): str(row.get("name") or row["area_id"])
        for row in _rows(areas)
        if row.get("area_id")
    }
    device_area = {str(row["id"]): row.get("area_id") for row in _rows(devices) if row.get("id")}
    placed: dict[str, Area] = {}
    for row in _rows(entities):
        entity_id = row.get("entity_id")
        area_id = row.get("area_id") or device_area.get(str(row.get("device_id")))
        if isinstance(entity_id, str) and area_id and str(area_id) in names:
            placed[entity_id] = Area(str(area_id), names[str(area_id)])
    return placed
