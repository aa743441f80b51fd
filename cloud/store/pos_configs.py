"""POS configurations: user path for their owner (row-level security keeps everyone else's out of
sight), system path for the webhook's lookup. Secrets arrive sealed and leave sealed."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "activate",
    "active_config_of",
    "config_by_id",
    "configs_for_webhook",
    "create_config",
    "delete_config",
    "get_config",
    "list_configs",
    "set_merchant",
    "update_config",
]

_COLUMNS = (
    "id, owner_id, name, environment, access_token, signature_key, notification_url,"
    " location_ids, crop_mappings, harvest_agent_ids, harvest_farm_ids, merchant_id, is_active,"
    " created_at, updated_at"
)
# Columns update_config may set; names never come from a request.
_WRITABLE = frozenset(
    {
        "name",
        "environment",
        "access_token",
        "signature_key",
        "notification_url",
        "location_ids",
        "crop_mappings",
        "harvest_agent_ids",
        "harvest_farm_ids",
    }
)


async def create_config(
    conn: Connection, config_id: UUID, values: dict[str, Any]
) -> asyncpg.Record:
    """Insert a configuration for the caller (user path); ``values`` hold sealed secrets."""
    row = await conn.fetchrow(
        "INSERT INTO pos_configs (id, owner_id, name, environment, access_token, signature_key,"
        " notification_url, location_ids, crop_mappings, harvest_agent_ids, harvest_farm_ids)"
        " VALUES ($1, authz.caller_id(), $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        f" RETURNING {_COLUMNS}",
        config_id,
        values["name"],
        values["environment"],
        values["access_token"],
        values["signature_key"],
        values["notification_url"],
        values["location_ids"],
        values["crop_mappings"],
        values["harvest_agent_ids"],
        values["harvest_farm_ids"],
    )
    assert row is not None  # INSERT ... RETURNING without ON CONFLICT returns the row
    return row


async def list_configs(
    conn: Connection, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """The caller's configurations, oldest first, and their total."""
    total: int = await conn.fetchval("SELECT count(*) FROM pos_configs")
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM pos_configs ORDER BY created_at, id LIMIT $1 OFFSET $2",
        limit,
        offset,
    )
    return list(rows), total


async def get_config(conn: Connection, config_id: UUID) -> asyncpg.Record | None:
    """One configuration, if visible to the caller."""
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM pos_configs WHERE id = $1", config_id)


config_by_id = get_config
"""The same lookup on the system path (the worker)."""


async def active_config_of(conn: Connection, owner_id: UUID) -> asyncpg.Record | None:
    """The owner's active configuration (either path)."""
    return await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM pos_configs WHERE owner_id = $1 AND is_active", owner_id
    )


async def update_config(
    conn: Connection, config_id: UUID, changes: dict[str, Any]
) -> asyncpg.Record | None:
    """Set ``changes``; the row after, or ``None`` if not visible."""
    unknown = changes.keys() - _WRITABLE
    if unknown:
        raise ValueError(f"not writable: {sorted(unknown)}")
    names = list(changes)
    assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=2))
    return await conn.fetchrow(
        f"UPDATE pos_configs SET {assignments}, updated_at = now() WHERE id = $1"
        f" RETURNING {_COLUMNS}",
        config_id,
        *changes.values(),
    )


async def delete_config(conn: Connection, config_id: UUID) -> bool:
    """Delete a configuration with its mirror, jobs and events."""
    status: str = await conn.execute("DELETE FROM pos_configs WHERE id = $1", config_id)
    return status != "DELETE 0"


async def activate(conn: Connection, config_id: UUID) -> asyncpg.Record | None:
    """Make this the caller's one active configuration (the others of theirs inactive)."""
    row = await conn.fetchrow(
        "SELECT owner_id FROM pos_configs WHERE id = $1 FOR UPDATE", config_id
    )
    if row is None:
        return None
    await conn.execute(
        "UPDATE pos_configs SET is_active = false, updated_at = now()"
        " WHERE owner_id = $1 AND is_active AND id <> $2",
        row["owner_id"],
        config_id,
    )
    return await conn.fetchrow(
        "UPDATE pos_configs SET is_active = true, updated_at = now() WHERE id = $1"
        f" RETURNING {_COLUMNS}",
        config_id,
    )


async def set_merchant(conn: Connection, config_id: UUID, merchant_id: str) -> None:
    """Remember the merchant the token belongs to (it routes webhook events)."""
    await conn.execute(
        "UPDATE pos_configs SET merchant_id = $2 WHERE id = $1 AND merchant_id IS DISTINCT FROM $2",
        config_id,
        merchant_id,
    )


async def configs_for_webhook(
    conn: Connection, merchant_id: str | None, config_id: UUID | None
) -> list[asyncpg.Record]:
    """Configurations an event may belong to: by merchant, or the one named (system path)."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM pos_configs WHERE signature_key IS NOT NULL"
        " AND notification_url IS NOT NULL"
        " AND (($1::text IS NOT NULL AND merchant_id = $1) OR id = $2)"
        " ORDER BY is_active DESC, created_at LIMIT 20",
        merchant_id,
        config_id,
    )
    return list(rows)
