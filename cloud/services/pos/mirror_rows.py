"""Provider objects as mirror rows: their key, location and times."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from cloud.pos_provider.resources import ResourceName, mirror_key
from cloud.store.pos_mirror import MirrorRow
from protocol.timefmt import parse_iso

__all__ = ["high_water", "mirror_row", "mirror_rows"]


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        return None


def mirror_row(resource: ResourceName, obj: dict[str, Any]) -> MirrorRow | None:
    """The row of an object; None when it carries no id (nothing to key it on)."""
    key = mirror_key(resource, obj)
    if key is None:
        return None
    created_text, updated_text = obj.get("created_at"), obj.get("updated_at")
    created = _time(created_text)
    # An object's first version was updated when it was created: one parse serves both.
    updated = created if updated_text == created_text else _time(updated_text)
    if created is None or updated is None:
        calculated = _time(obj.get("calculated_at"))
        created = created or calculated
        updated = updated or calculated or created
    location = obj.get("location_id")
    if resource == "locations":
        location = key
    return MirrorRow(key, str(location) if location else None, created, updated, obj)


def mirror_rows(resource: ResourceName, objects: Iterable[dict[str, Any]]) -> list[MirrorRow]:
    """Rows for the objects that carry an id (others are skipped)."""
    return [row for obj in objects if (row := mirror_row(resource, obj)) is not None]


def high_water(current: datetime | None, rows: Iterable[MirrorRow]) -> datetime | None:
    """The latest time seen: where the next incremental pull starts."""
    latest = current
    for row in rows:
        moment = row.updated_at or row.created_at
        if moment is not None and (latest is None or moment > latest):
            latest = moment
    return latest
