"""Applies stored webhook events to the mirror (system path, in the order received).

``payment.*``, ``refund.*``, ``customer.*``, ``dispute.*`` carry the object: it is upserted (a
deletion flags it). ``inventory.count.updated`` carries the counts. ``order.*`` events carry only
the order's id and version, and ``catalog.version.updated`` only that the catalog changed: each
queues an incremental sync of its kind, which the live-job rule keeps to one at a time.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any
from uuid import UUID

import asyncpg

from cloud.pos_provider.resources import ResourceName
from cloud.services.pos.jobs import enqueue
from cloud.services.pos.mirror_rows import mirror_rows
from cloud.store import pos_mirror, pos_webhooks
from cloud.store.db import Connection, Database
from cloud.store.pos_mirror import MirrorRow
from protocol.schemas.pos import PosSyncKind

__all__ = ["WebhookApplier"]

log = logging.getLogger(__name__)

# Event family -> (mirror resource, key of the object under data.object).
_OBJECTS: dict[str, tuple[ResourceName, str]] = {
    "payment": ("payments", "payment"),
    "refund": ("refunds", "refund"),
    "customer": ("customers", "customer"),
    "dispute": ("disputes", "dispute"),
}
_SYNCS: dict[str, PosSyncKind] = {"order": "orders", "catalog": "products"}
_BATCH = 200


class _Batch:
    """Upserts gathered per configuration and resource, written in one statement each; flushed
    before anything that must see them (a deletion, a queued sync) and at the end."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._rows: dict[tuple[UUID, UUID, ResourceName], list[MirrorRow]] = defaultdict(list)

    def add(
        self, config_id: UUID, owner_id: UUID, resource: ResourceName, rows: list[MirrorRow]
    ) -> None:
        self._rows[(config_id, owner_id, resource)].extend(rows)

    async def flush(self) -> None:
        for (config_id, owner_id, resource), rows in self._rows.items():
            await pos_mirror.upsert_objects(self._conn, config_id, owner_id, resource, rows)
        self._rows.clear()


class WebhookApplier:
    """Drains the stored events."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def apply_pending(self) -> int:
        """Apply a batch of stored events in one transaction; how many there were."""
        async with self._db.as_system() as conn:
            events = await pos_webhooks.claim_events(conn, _BATCH)
            batch = _Batch(conn)
            done = []
            for event in events:
                error = await self._apply(conn, batch, event)
                done.append((event["config_id"], event["event_id"], error))
            await batch.flush()
            await pos_webhooks.mark_all_applied(conn, done)
        return len(events)

    async def _apply(self, conn: Connection, batch: _Batch, event: asyncpg.Record) -> str | None:
        body: dict[str, Any] = event["body"]
        family = str(event["type"]).split(".", 1)[0]
        data = body.get("data") if isinstance(body.get("data"), dict) else {}
        assert isinstance(data, dict)
        config_id, owner_id = event["config_id"], event["owner_id"]
        if family in _OBJECTS:
            resource, key = _OBJECTS[family]
            if data.get("deleted"):
                if data.get("id"):
                    await batch.flush()  # a deletion after an update in the same batch wins
                    await pos_mirror.mark_deleted(conn, config_id, resource, str(data["id"]))
                return None
            obj = (data.get("object") or {}).get(key)
            if not isinstance(obj, dict):
                return f"no {key} object in the event"
            batch.add(config_id, owner_id, resource, mirror_rows(resource, [obj]))
            return None
        if family == "inventory":
            counts = (data.get("object") or {}).get("inventory_counts")
            if not isinstance(counts, list):
                return "no inventory_counts in the event"
            objects = [c for c in counts if isinstance(c, dict)]
            batch.add(config_id, owner_id, "inventory", mirror_rows("inventory", objects))
            return None
        if family in _SYNCS:
            await enqueue(conn, config_id, owner_id, _SYNCS[family], "webhook")
            return None
        log.info("POS webhook: event type %s is not applied", event["type"])
        return "event type not applied"
