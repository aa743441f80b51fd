"""Webhooks and the outbox of their deliveries, in SQLite (migration 0070).

The agent is one process: a claim is an in-memory hold on the claimed ids, released once the
outcomes are committed, so two delivery loops never post one delivery at once. After a crash
nothing is held and every pending delivery is due again.

A claim first asks when the first pending delivery is due, a point read on the event loop's
thread (no hop to a reader thread), and claims only once one is; a claim that found nothing
remembers when the next one is due (``NothingDue``): until then, while no commit lands, the
delivery loop's look every second answers without a query. Whatever queues a delivery (an
event's trigger, a harvest's, the test message, a webhook enabled again) is a commit that
counts; the hot writes (readings, stamps, command records) never queue one.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from agent.store.access import writable_page
from agent.store.cache import NothingDue
from agent.store.db import Database
from integrations.webhooks import DueDelivery, Verdict
from integrations.webhooks.health import fold_health
from protocol.identity import Principal
from protocol.timefmt import iso, parse_iso

__all__ = ["ClaimedDeliveries", "WebhookStore"]

_WEBHOOK_COLUMNS = (
    "id, farm_id, url, description, event_types, enabled, disabled_reason, failing_since,"
    " consecutive_failures, last_success_at, last_failure_at, created_at, updated_at"
)
_DELIVERY_COLUMNS = (
    "id, webhook_id, event_type, event_id, status, attempts, last_status_code, last_error,"
    " last_attempt_at, next_attempt_at, created_at, delivered_at"
)

_CLAIM = (
    "SELECT d.id, d.webhook_id, w.url, w.secret, d.body, d.attempts, d.created_at"
    " FROM webhook_deliveries AS d JOIN webhooks AS w ON w.id = d.webhook_id"
    " WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND w.enabled = 1"
    " AND d.id NOT IN (SELECT value FROM json_each(?))"
    " ORDER BY d.next_attempt_at LIMIT ?"
)

# When the first pending delivery is due, whatever its webhook and whoever holds it: one seek in
# the index of pending deliveries, read on the event loop's thread. Nothing is due before then.
_FIRST_DUE = "SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending'"


def _webhook(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["event_types"] = json.loads(out["event_types"])
    out["enabled"] = bool(out["enabled"])
    return out


def _delivery(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    if out["status"] != "pending":
        out["next_attempt_at"] = None
    return out


class ClaimedDeliveries:
    """Deliveries this loop holds until its ``claim`` block ends."""

    def __init__(self, store: WebhookStore, deliveries: list[DueDelivery]) -> None:
        self._store = store
        self.deliveries = deliveries

    async def settle(self, verdicts: Sequence[Verdict], disable_after_s: float) -> list[str]:
        """Record the verdicts in one transaction (see :meth:`WebhookStore.settle`)."""
        return await self._store.settle(verdicts, disable_after_s)


class WebhookStore:
    """Reads and writes ``webhooks`` and ``webhook_deliveries``."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._held: set[str] = set()
        # Claims one at a time: a claim's read then always sees every id held before it, and a
        # delivery is released only once its outcome is committed, so no read sees it pending
        # after it was settled (docs/adr/0051-outgoing-webhooks.md).
        self._claiming = asyncio.Lock()
        self._nothing_due = NothingDue(db)

    # Webhooks ----------------------------------------------------------------------------------

    async def create(self, fields: Mapping[str, Any]) -> None:
        """Insert a webhook (``event_types`` a list)."""
        values = dict(fields, event_types=json.dumps(list(fields["event_types"])))
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO webhooks ({names}) VALUES ({marks})", list(values.values())
            )

    async def get(self, webhook_id: str) -> dict[str, Any] | None:
        """One webhook without its secret, visible or not (the service authorizes)."""
        row = await self._db.fetch_one(
            f"SELECT {_WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?", (webhook_id,)
        )
        return None if row is None else _webhook(row)

    async def page(
        self, principal: Principal, farm_id: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Webhooks of the farms the caller may write, oldest first, and their total."""
        rows, total = await writable_page(
            self._db, "webhooks", _WEBHOOK_COLUMNS, principal, farm_id, limit, offset
        )
        return [_webhook(row) for row in rows], total

    async def replace(self, webhook_id: str, fields: Mapping[str, Any]) -> bool:
        """Change a webhook's settings; ``False`` if it is gone."""
        values = dict(fields)
        if "event_types" in values:
            values["event_types"] = json.dumps(list(values["event_types"]))
        assignments = ", ".join(f"{name} = ?" for name in values)
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"UPDATE webhooks SET {assignments} WHERE id = ?", [*values.values(), webhook_id]
            )
            return cursor.rowcount == 1

    async def delete(self, webhook_id: str) -> bool:
        """Remove a webhook and its deliveries; ``False`` if it was gone."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute("DELETE FROM webhooks WHERE id = ?", (webhook_id,))
            return cursor.rowcount == 1

    # Deliveries --------------------------------------------------------------------------------

    async def deliveries(
        self, webhook_id: str, status: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """A webhook's deliveries, newest first, and their total."""
        condition, params = "webhook_id = ?", [webhook_id]
        if status is not None:
            condition += " AND status = ?"
            params.append(status)
        rows, total = await self._db.fetch_page(
            "webhook_deliveries",
            condition,
            params,
            order="created_at DESC, id",
            limit=limit,
            offset=offset,
            columns=_DELIVERY_COLUMNS,
        )
        return [_delivery(row) for row in rows], total

    async def delivery(self, delivery_id: str) -> dict[str, Any] | None:
        """One delivery."""
        row = await self._db.fetch_one(
            f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ?", (delivery_id,)
        )
        return None if row is None else _delivery(row)

    async def pending_count(self) -> int:
        """Deliveries still to be made (an operator figure)."""
        count = await self._db.fetch_value(
            "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"
        )
        return int(count)

    async def queue(self, webhook_id: str, event_type: str, body: str, at: datetime) -> str:
        """Queue one delivery of ``body`` (the test endpoint's); its id."""
        delivery_id = str(uuid.uuid4())
        stamp = iso(at)
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO webhook_deliveries (id, webhook_id, event_type, body,"
                " next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (delivery_id, webhook_id, event_type, body, stamp, stamp),
            )
        return delivery_id

    @asynccontextmanager
    async def claim(self, limit: int, now: datetime) -> AsyncIterator[ClaimedDeliveries]:
        """Up to ``limit`` pending deliveries due at ``now`` of enabled webhooks that no other
        loop holds, held until the block ends."""
        async with self._claiming:
            stamp = iso(now)
            rows: list[sqlite3.Row] = []
            if not self._nothing_due.holds(stamp):
                generation = self._nothing_due.generation()
                first = await self._db.lookup(_FIRST_DUE)
                if first is None or first[0] is None or stamp < first[0]:
                    self._nothing_due.found_nothing(generation, None if first is None else first[0])
                else:
                    held = json.dumps(sorted(self._held))
                    rows = list(await self._db.fetch_all(_CLAIM, (stamp, held, limit)))
                    if not rows:
                        self._nothing_due.found_nothing(generation, await self._next_due(held))
            self._held |= {row["id"] for row in rows}
        due = [
            DueDelivery(
                id=row["id"],
                webhook_id=row["webhook_id"],
                url=row["url"],
                secret=row["secret"],
                body=row["body"],
                attempts=row["attempts"],
                created_at=parse_iso(row["created_at"]),
            )
            for row in rows
        ]
        ids = {d.id for d in due}
        try:
            yield ClaimedDeliveries(self, due)
        finally:
            self._held -= ids
            if ids:  # released unsettled (a failed settle commits nothing): due again
                self._nothing_due.forget()

    async def _next_due(self, held: str) -> str | None:
        """When the first pending delivery of an enabled webhook not in ``held`` is due."""
        due = await self._db.fetch_value(
            "SELECT min(d.next_attempt_at) FROM webhook_deliveries AS d"
            " JOIN webhooks AS w ON w.id = d.webhook_id"
            " WHERE d.status = 'pending' AND w.enabled = 1"
            " AND d.id NOT IN (SELECT value FROM json_each(?))",
            (held,),
        )
        return None if due is None else str(due)

    async def prune(self, before: datetime, chunk: int) -> int:
        """Delete up to ``chunk`` delivered or failed deliveries created before ``before``."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries"
                " WHERE status <> 'pending' AND created_at < ? LIMIT ?)",
                (iso(before), chunk),
            )
            return cursor.rowcount

    async def settle(self, verdicts: Sequence[Verdict], disable_after_s: float) -> list[str]:
        """Record attempts, each webhook's health, and disable (with a ``webhook_disabled``
        event) the webhooks failing for ``disable_after_s``; all in one transaction."""
        if not verdicts:
            return []
        return await self._db.write(lambda conn: _settle(conn, verdicts, disable_after_s))


def _settle(
    conn: sqlite3.Connection, verdicts: Sequence[Verdict], disable_after_s: float
) -> list[str]:
    conn.executemany(
        "UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1,"
        " last_status_code = ?, last_error = ?, last_attempt_at = ?,"
        " next_attempt_at = coalesce(?, next_attempt_at),"
        " delivered_at = CASE WHEN ? = 'delivered' THEN ? END"
        " WHERE id = ? AND status = 'pending'",
        [
            (
                v.status,
                v.status_code,
                v.error,
                iso(v.attempted_at),
                None if v.next_attempt_at is None else iso(v.next_attempt_at),
                v.status,
                iso(v.attempted_at),
                v.delivery_id,
            )
            for v in verdicts
        ],
    )
    health = fold_health(verdicts)
    disabled = []
    for webhook_id, (ok, failed, at) in health.items():
        stamp = iso(at)
        if ok:
            # The receiver answers: whatever failed in the same batch, it is not failing.
            conn.execute(
                "UPDATE webhooks SET failing_since = NULL, consecutive_failures = 0,"
                " last_success_at = ? WHERE id = ?",
                (stamp, webhook_id),
            )
            continue
        conn.execute(
            "UPDATE webhooks SET failing_since = coalesce(failing_since, ?),"
            " consecutive_failures = consecutive_failures + ?, last_failure_at = ? WHERE id = ?",
            (stamp, failed, stamp, webhook_id),
        )
        cutoff = iso(at - timedelta(seconds=disable_after_s))
        row = conn.execute(
            "SELECT farm_id, description, failing_since, consecutive_failures FROM webhooks"
            " WHERE id = ? AND enabled = 1 AND failing_since <= ?",
            (webhook_id, cutoff),
        ).fetchone()
        if row is None:
            continue
        farm_id, description, since, failures = row
        reason = f"every delivery failed since {since} ({failures} attempts)"
        conn.execute(
            "UPDATE webhooks SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ?",
            (reason, stamp, webhook_id),
        )
        conn.execute(
            "UPDATE webhook_deliveries SET status = 'failed',"
            " last_error = coalesce(last_error || '; ', '') || 'webhook disabled'"
            " WHERE webhook_id = ? AND status = 'pending'",
            (webhook_id,),
        )
        data = {
            "webhook_id": webhook_id,
            "description": description,
            "failing_since": since,
            "consecutive_failures": failures,
        }
        conn.execute(
            "INSERT INTO events (id, farm_id, device_id, kind, severity, message, data, ts)"
            " VALUES (?, ?, NULL, 'webhook_disabled', 'warning', ?, ?, ?)",
            (
                str(uuid.uuid4()),
                farm_id,
                f"Webhook disabled: {reason}",
                json.dumps(data, separators=(",", ":")),
                stamp,
            ),
        )
        disabled.append(webhook_id)
    return disabled
