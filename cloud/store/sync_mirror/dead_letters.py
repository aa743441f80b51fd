"""Records the mirror refused, kept for an operator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["dead_letter", "dead_letters"]


async def dead_letter(
    conn: Connection,
    agent_id: UUID,
    refused: Sequence[tuple[int, str, str, str, dict[str, Any]]],
) -> None:
    """Keep refused records (seq, kind, key, reason, data) for an operator, and count them."""
    await conn.executemany(
        "INSERT INTO sync_dead_letters (agent_id, seq, kind, key, reason, data)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [(agent_id, seq, kind, key, reason, data) for seq, kind, key, reason, data in refused],
    )
    await conn.execute(
        "UPDATE agents SET refused_records = refused_records + $2 WHERE id = $1",
        agent_id,
        len(refused),
    )


async def dead_letters(
    conn: Connection, agent_id: UUID, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """A page of the agent's refused records, newest first, and their total."""
    rows = await conn.fetch(
        "SELECT seq, kind, key, reason, data, received_at FROM sync_dead_letters"
        " WHERE agent_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3",
        agent_id,
        limit,
        offset,
    )
    total = await conn.fetchval(
        "SELECT count(*) FROM sync_dead_letters WHERE agent_id = $1", agent_id
    )
    return list(rows), int(total)
