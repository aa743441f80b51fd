"""Webhook events of the provider: stored first (a repeated ``event_id`` is dropped by the
primary key), applied later by the worker (system path: an event acts for no user)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["claim_events", "mark_all_applied", "store_event"]


async def store_event(
    conn: Connection,
    config: asyncpg.Record,
    event_id: str,
    event_type: str,
    body: dict[str, Any],
) -> bool | None:
    """Keep the event for ``config`` (a row of ``configs_for_webhook``), in one statement;
    ``False`` if this event id was already received for the configuration, ``None`` (nothing
    stored) if the configuration is gone or its signature key or notification URL changed since
    ``config`` was read."""
    try:
        row = await conn.fetchrow(
            """
            WITH config AS (
                SELECT id, owner_id FROM pos_configs
                WHERE id = $1 AND signature_key = $2 AND notification_url = $3
            ), stored AS (
                INSERT INTO pos_webhook_events (config_id, owner_id, event_id, type, body)
                SELECT id, owner_id, $4, $5, $6 FROM config
                ON CONFLICT DO NOTHING RETURNING true
            )
            SELECT EXISTS (SELECT FROM config) AS current, EXISTS (SELECT FROM stored) AS stored
            """,
            config["id"],
            config["signature_key"],
            config["notification_url"],
            event_id,
            event_type,
            body,
        )
    except asyncpg.ForeignKeyViolationError:
        return None  # deleted between the look-up and the insert
    assert row is not None  # a SELECT without FROM answers one row
    return bool(row["stored"]) if row["current"] else None


async def claim_events(conn: Connection, limit: int) -> list[asyncpg.Record]:
    """Unapplied events, oldest first, locked for this transaction (others skip them)."""
    rows = await conn.fetch(
        "SELECT config_id, owner_id, event_id, type, body FROM pos_webhook_events"
        " WHERE applied_at IS NULL ORDER BY received_at LIMIT $1 FOR UPDATE SKIP LOCKED",
        limit,
    )
    return list(rows)


async def mark_all_applied(conn: Connection, done: list[tuple[UUID, str, str | None]]) -> None:
    """Mark a batch of events done: (config id, event id, error or None) each."""
    if not done:
        return
    await conn.execute(
        "UPDATE pos_webhook_events AS w SET applied_at = now(), error = d.error"
        " FROM unnest($1::uuid[], $2::text[], $3::text[]) AS d (config_id, event_id, error)"
        " WHERE w.config_id = d.config_id AND w.event_id = d.event_id",
        [c for c, _, _ in done],
        [e for _, e, _ in done],
        [err for _, _, err in done],
    )
