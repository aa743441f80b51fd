"""Writes of sync apply into the mirror (system path)."""

from cloud.store.sync_mirror.entities import (
    ENTITIES,
    ReadingRows,
    RollupRow,
    dead_letter,
    dead_letters,
    delete_entity,
    device_state,
    hold,
    insert_readings,
    known_devices,
    merge_rollups,
    own_devices,
    release_held,
    upsert_entity,
)

__all__ = [
    "ENTITIES",
    "ReadingRows",
    "RollupRow",
    "dead_letter",
    "dead_letters",
    "delete_entity",
    "device_state",
    "hold",
    "insert_readings",
    "known_devices",
    "merge_rollups",
    "own_devices",
    "release_held",
    "upsert_entity",
]
