"""Records held until the mirror has their device (a device's record may come in a later batch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection
from cloud.store.sync_mirror.confinement import MINE

__all__ = ["hold", "known_devices", "release_held"]


async def known_devices(conn: Connection, device_ids: Sequence[UUID]) -> set[UUID]:
    """Those of ``device_ids`` the mirror holds, whoever's farm they are on."""
    rows = await conn.fetch(
        "SELECT id FROM devices WHERE id = ANY($1::uuid[])", list(set(device_ids))
    )
    return {r["id"] for r in rows}


async def hold(
    conn: Connection,
    agent_id: UUID,
    held: Sequence[tuple[UUID, int, str, str, dict[str, Any]]],
) -> None:
    """Keep records (device, seq, kind, key, data) whose device the mirror does not hold yet,
    until the agent's record of it arrives (migration 0111)."""
    await conn.executemany(
        "INSERT INTO sync_held_blocks (agent_id, device_id, seq, kind, key, data)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [(agent_id, device, seq, kind, key, data) for device, seq, kind, key, data in held],
    )


async def release_held(conn: Connection, agent_id: UUID) -> list[asyncpg.Record]:
    """Take the held records whose device now sits on one of the agent's farms (seq, kind,
    key, data), oldest first."""
    return list(
        await conn.fetch(
            "DELETE FROM sync_held_blocks AS h WHERE h.agent_id = $1 AND h.device_id IN"
            f" (SELECT d.id FROM devices AS d WHERE d.farm_id IN {MINE})"
            " RETURNING h.id, h.seq, h.kind, h.key, h.data",
            agent_id,
        )
    )
