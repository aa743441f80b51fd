"""The event log: batched inserts, the visible list, acknowledgement and retention."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.store.access import visible_farm_filter
from agent.store.db import Database
from agent.store.farms import like_pattern
from protocol.identity import Principal

__all__ = ["EventFilter", "EventRecord", "EventStore", "event_row"]


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One event to store; ``ts`` is ISO 8601 UTC with milliseconds and a trailing Z."""

    id: str
    farm_id: str
    device_id: str | None
    kind: str
    severity: str
    message: str
    ts: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events to list: ``since`` inclusive, ``until`` exclusive (ISO strings)."""

    farm_id: str | None = None
    device_id: str | None = None
    severity: str | None = None
    kind: str | None = None
    since: str | None = None
    until: str | None = None
    acknowledged: bool | None = None
    search: str | None = None
    """Kind or message contains this (case-insensitive)."""


def event_row(row: sqlite3.Row) -> dict[str, Any]:
    """A stored event as the API's ``Event`` fields."""
    return {
        "id": row["id"],
        "farm_id": row["farm_id"],
        "device_id": row["device_id"],
        "kind": row["kind"],
        "severity": row["severity"],
        "message": row["message"],
        "data": json.loads(row["data"]),
        "timestamp": row["ts"],
        "acknowledged_at": row["acknowledged_at"],
        "acknowledged_by": row["acknowledged_by"],
    }


class EventStore:
    """Reads and writes the ``events`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def insert_many(self, records: Sequence[EventRecord]) -> int:
        """Store events in one transaction; events of farms deleted meanwhile are skipped.

        Returns how many were stored.
        """
        stored = 0
        async with self._db.transaction() as conn:
            for r in records:
                cursor = await conn.execute(
                    "INSERT OR IGNORE INTO events"
                    " (id, farm_id, device_id, kind, severity, message, data, ts)"
                    " SELECT ?, ?, ?, ?, ?, ?, ?, ?"
                    " WHERE EXISTS (SELECT 1 FROM farms WHERE id = ?)",
                    (
                        r.id,
                        r.farm_id,
                        r.device_id,
                        r.kind,
                        r.severity,
                        r.message,
                        _json(r.data),
                        r.ts,
                        r.farm_id,
                    ),
                )
                stored += cursor.rowcount
        return stored

    async def list(
        self, principal: Principal, where: EventFilter, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Visible events matching every filter given, newest first, and their total."""
        condition, params = visible_farm_filter(principal, "farm_id")
        for column, op, value in (
            ("farm_id", "=", where.farm_id),
            ("device_id", "=", where.device_id),
            ("severity", "=", where.severity),
            ("kind", "=", where.kind),
            ("ts", ">=", where.since),
            ("ts", "<", where.until),
        ):
            if value is not None:
                condition += f" AND {column} {op} ?"
                params.append(value)
        if where.acknowledged is not None:
            condition += f" AND acknowledged_at IS {'NOT ' if where.acknowledged else ''}NULL"
        if where.search and where.search.strip():
            condition += " AND (kind LIKE ? ESCAPE '\\' OR message LIKE ? ESCAPE '\\')"
            params.extend([like_pattern(where.search.strip())] * 2)
        rows, total = await self._db.fetch_page(
            "events", condition, params, order="ts DESC, id", limit=limit, offset=offset
        )
        return [event_row(row) for row in rows], total

    async def get(self, event_id: str) -> dict[str, Any] | None:
        """One event, visible or not (the service authorizes on its farm)."""
        row = await self._db.fetch_one("SELECT * FROM events WHERE id = ?", (event_id,))
        return None if row is None else event_row(row)

    async def acknowledge(self, event_id: str, user_id: str, at: str) -> dict[str, Any] | None:
        """Mark an event acknowledged by ``user_id``; the first acknowledgement is kept."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE events SET acknowledged_at = ?, acknowledged_by = ?"
                " WHERE id = ? AND acknowledged_at IS NULL",
                (at, user_id, event_id),
            )
        return await self.get(event_id)

    async def acknowledge_group(
        self, farm_id: str, kind: str, device_id: str | None, until: str, user_id: str, at: str
    ) -> int:
        """Acknowledge every unacknowledged event of a farm of ``kind`` and ``device_id`` (None:
        of no device) up to ``until``; how many."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE events SET acknowledged_at = ?, acknowledged_by = ?"
                " WHERE farm_id = ? AND kind = ? AND device_id IS ? AND ts <= ?"
                " AND acknowledged_at IS NULL",
                (at, user_id, farm_id, kind, device_id, until),
            )
            return cursor.rowcount

    async def delete_before(self, ts: str, chunk: int) -> int:
        """Delete up to ``chunk`` events older than ``ts``; return how many went."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM events WHERE id IN"
                " (SELECT id FROM events WHERE ts < ? ORDER BY ts LIMIT ?)",
                (ts, chunk),
            )
            return cursor.rowcount


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(key): _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _json(data: Mapping[str, Any]) -> str:
    """Strict JSON (the outbox trigger's json() refuses NaN and Infinity): those become null."""
    try:
        return json.dumps(data, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(data), separators=(",", ":"), default=str, allow_nan=False)
