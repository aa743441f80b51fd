"""Webhooks and the outbox of their deliveries in PostgreSQL (migration 0070).

CRUD runs on the user path (RLS: farms the caller may write). Delivery runs on the system path:
a claim locks its rows (``FOR UPDATE SKIP LOCKED``) in a transaction that stays open while they
are posted and ends with their outcome, so several cloud processes never post one delivery at
once, and a process that dies mid-post releases its rows to the others (its transaction rolls
back).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection, Database
from integrations.webhooks import DueDelivery, Verdict
from integrations.webhooks.health import fold_health

__all__ = [
    "ClaimedRows",
    "WebhookOutbox",
    "create",
    "delete",
    "deliveries",
    "get",
    "page",
    "queue",
    "replace",
]

_WEBHOOK_COLUMNS = (
    "id, farm_id, url, description, event_types, enabled, disabled_reason, failing_since,"
    " consecutive_failures, last_success_at, last_failure_at, created_at, updated_at"
)
_DELIVERY_COLUMNS = (
    "id, webhook_id, event_type, event_id, status, attempts, last_status_code, last_error,"
    " last_attempt_at, next_attempt_at, created_at, delivered_at"
)


def _delivery(row: asyncpg.Record) -> dict[str, Any]:
    out = dict(row)
    if out["status"] != "pending":
        out["next_attempt_at"] = None
    return out


# Webhooks (user path) ------------------------------------------------------------------------


async def create(conn: Connection, fields: Mapping[str, Any]) -> None:
    """Insert a webhook (RLS refuses a farm the caller may not write)."""
    names = ", ".join(fields)
    marks = ", ".join(f"${n}" for n in range(1, len(fields) + 1))
    await conn.execute(f"INSERT INTO webhooks ({names}) VALUES ({marks})", *fields.values())


async def get(conn: Connection, webhook_id: UUID) -> dict[str, Any] | None:
    """One webhook without its secret, if the caller may see it."""
    row = await conn.fetchrow(f"SELECT {_WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1", webhook_id)
    return None if row is None else dict(row)


async def page(
    conn: Connection, farm_id: UUID | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """Visible webhooks, oldest first, and their total."""
    rows = await conn.fetch(
        f"SELECT {_WEBHOOK_COLUMNS}, count(*) OVER () AS total FROM webhooks"
        " WHERE ($1::uuid IS NULL OR farm_id = $1) ORDER BY created_at, id LIMIT $2 OFFSET $3",
        farm_id,
        limit,
        offset,
    )
    total = (
        rows[0]["total"]
        if rows
        else await conn.fetchval(
            "SELECT count(*) FROM webhooks WHERE ($1::uuid IS NULL OR farm_id = $1)", farm_id
        )
    )
    return [{k: v for k, v in row.items() if k != "total"} for row in rows], int(total)


async def replace(conn: Connection, webhook_id: UUID, fields: Mapping[str, Any]) -> bool:
    """Change a webhook's settings; ``False`` if it is gone."""
    assignments = ", ".join(f"{name} = ${n}" for n, name in enumerate(fields, start=2))
    done = await conn.execute(
        f"UPDATE webhooks SET {assignments} WHERE id = $1", webhook_id, *fields.values()
    )
    return bool(done == "UPDATE 1")


async def delete(conn: Connection, webhook_id: UUID) -> bool:
    """Remove a webhook and its deliveries; ``False`` if it was gone."""
    return bool(await conn.execute("DELETE FROM webhooks WHERE id = $1", webhook_id) == "DELETE 1")


async def deliveries(
    conn: Connection, webhook_id: UUID, status: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A webhook's deliveries, newest first, and their total."""
    where = "webhook_id = $1 AND ($2::text IS NULL OR status = $2)"
    rows = await conn.fetch(
        f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE {where}"
        " ORDER BY created_at DESC, id LIMIT $3 OFFSET $4",
        webhook_id,
        status,
        limit,
        offset,
    )
    total = await conn.fetchval(
        f"SELECT count(*) FROM webhook_deliveries WHERE {where}", webhook_id, status
    )
    return [_delivery(row) for row in rows], int(total)


async def queue(
    conn: Connection, webhook_id: UUID, farm_id: UUID, event_type: str, body: str
) -> dict[str, Any]:
    """Queue one delivery of ``body`` (the test endpoint's)."""
    row = await conn.fetchrow(
        "INSERT INTO webhook_deliveries (webhook_id, farm_id, event_type, body)"
        f" VALUES ($1, $2, $3, $4) RETURNING {_DELIVERY_COLUMNS}",
        webhook_id,
        farm_id,
        event_type,
        body,
    )
    assert row is not None  # RETURNING of an INSERT that succeeded
    return _delivery(row)


# Delivery (system path) ----------------------------------------------------------------------


class ClaimedRows:
    """Deliveries locked by this transaction until its block ends."""

    def __init__(self, conn: Connection, deliveries: list[DueDelivery]) -> None:
        self._conn = conn
        self.deliveries = deliveries

    async def settle(self, verdicts: Sequence[Verdict], disable_after_s: float) -> list[str]:
        """Record the verdicts and each webhook's health in the claim's transaction; disable
        (with a ``webhook_disabled`` event) webhooks failing for ``disable_after_s``."""
        conn = self._conn
        await conn.executemany(
            "UPDATE webhook_deliveries SET status = $2::text, attempts = attempts + 1,"
            " last_status_code = $3, last_error = $4, last_attempt_at = $5::timestamptz,"
            " next_attempt_at = coalesce($6::timestamptz, next_attempt_at),"
            " delivered_at = CASE WHEN $2::text = 'delivered' THEN $5::timestamptz END"
            " WHERE id = $1 AND status = 'pending'",
            [
                (
                    UUID(v.delivery_id),
                    v.status,
                    v.status_code,
                    v.error,
                    v.attempted_at,
                    v.next_attempt_at,
                )
                for v in verdicts
            ],
        )
        health = fold_health(verdicts)
        disabled = []
        for webhook_id, (ok, failed, at) in sorted(health.items()):
            if ok:
                await conn.execute(
                    "UPDATE webhooks SET failing_since = NULL, consecutive_failures = 0,"
                    " last_success_at = $2 WHERE id = $1",
                    UUID(webhook_id),
                    at,
                )
                continue
            row = await conn.fetchrow(
                "UPDATE webhooks SET failing_since = coalesce(failing_since, $2),"
                " consecutive_failures = consecutive_failures + $3, last_failure_at = $2"
                " WHERE id = $1 RETURNING farm_id, description, failing_since,"
                " consecutive_failures, enabled",
                UUID(webhook_id),
                at,
                failed,
            )
            if row is None or not row["enabled"]:
                continue
            if row["failing_since"] > at - timedelta(seconds=disable_after_s):
                continue
            since = row["failing_since"]
            reason = (
                f"every delivery failed since {since.isoformat()} "
                f"({row['consecutive_failures']} attempts)"
            )
            await conn.execute(
                "UPDATE webhooks SET enabled = false, disabled_reason = $2, updated_at = $3"
                " WHERE id = $1",
                UUID(webhook_id),
                reason,
                at,
            )
            await conn.execute(
                "UPDATE webhook_deliveries SET status = 'failed',"
                " last_error = coalesce(last_error || '; ', '') || 'webhook disabled'"
                " WHERE webhook_id = $1 AND status = 'pending'",
                UUID(webhook_id),
            )
            await conn.execute(
                "INSERT INTO events (farm_id, kind, severity, message, data, ts)"
                " VALUES ($1, 'webhook_disabled', 'warning', $2, $3, $4)",
                row["farm_id"],
                f"Webhook disabled: {reason}",
                {
                    "webhook_id": webhook_id,
                    "description": row["description"],
                    "failing_since": since.isoformat(),
                    "consecutive_failures": row["consecutive_failures"],
                },
                at,
            )
            disabled.append(webhook_id)
        return disabled


class WebhookOutbox:
    """The cloud's :class:`integrations.webhooks.DeliveryStore`."""

    def __init__(self, db: Database, open_secret: Callable[[UUID, bytes], str]) -> None:
        self._db = db
        self._open_secret = open_secret

    async def prune(self, before: datetime, chunk: int) -> int:
        """Delete up to ``chunk`` delivered or failed deliveries created before ``before``."""
        async with self._db.as_system() as conn:
            done = await conn.execute(
                "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries"
                " WHERE status <> 'pending' AND created_at < $1 LIMIT $2"
                " FOR UPDATE SKIP LOCKED)",
                before,
                chunk,
            )
        return int(done.split()[-1])

    @asynccontextmanager
    async def claim(self, limit: int, now: datetime) -> AsyncIterator[ClaimedRows]:
        """Lock up to ``limit`` due deliveries of enabled webhooks that no other transaction
        holds; the lock lasts until the block ends."""
        async with self._db.as_system() as conn:
            rows = await conn.fetch(
                "SELECT d.id, d.webhook_id, w.url, w.secret, d.body, d.attempts, d.created_at"
                " FROM webhook_deliveries AS d JOIN webhooks AS w ON w.id = d.webhook_id"
                " WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND w.enabled"
                " ORDER BY d.next_attempt_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED",
                now,
                limit,
            )
            due = [
                DueDelivery(
                    id=str(row["id"]),
                    webhook_id=str(row["webhook_id"]),
                    url=row["url"],
                    secret=self._open_secret(row["webhook_id"], row["secret"]),
                    body=row["body"],
                    attempts=row["attempts"],
                    created_at=row["created_at"],
                )
                for row in rows
            ]
            yield ClaimedRows(conn, due)
