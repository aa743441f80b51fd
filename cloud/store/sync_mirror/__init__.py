"""Writes of sync apply into the mirror (system path): upserts and deletes of the agent's
entities, raw readings, 1-minute and 1-hour rollups, and the records it refused.

Every statement is confined to the farms of the applying agent: a farm is written only if it is
new or already that agent's, a child only under one of that agent's farms. A write that the
confinement refuses affects no row, and the caller refuses the record (dead letter).

Only kinds that flow up (protocol/sync_kinds.py) have a statement here: identity (users,
permissions, sessions, API keys) belongs to the cloud and is never written from a batch.

entities.py holds the upserts and deletes (entity_values.py converts the agent's values,
confinement.py confines every statement), readings.py and rollups.py the readings, held.py the
records waiting for their device, dead_letters.py the refused ones.
"""

from cloud.store.sync_mirror.dead_letters import dead_letter, dead_letters
from cloud.store.sync_mirror.entities import ENTITIES, delete_entity, device_state, upsert_entity
from cloud.store.sync_mirror.held import hold, known_devices, release_held
from cloud.store.sync_mirror.readings import ReadingRows, insert_readings, own_devices
from cloud.store.sync_mirror.rollups import RollupRow, merge_rollups

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
