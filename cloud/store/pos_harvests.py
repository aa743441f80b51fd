"""Harvest pushes: queued by a trigger when a harvested grow plan reaches the mirror (migration
0040), claimed and pushed by the worker (system path), one per grow plan for ever."""

from __future__ import annotations

from decimal import Decimal
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = ["claim_push", "config_for_farm", "finish_push", "list_pushes", "retry_push"]


async def claim_push(conn: Connection) -> asyncpg.Record | None:
    """The oldest due push, locked for this transaction."""
    return await conn.fetchrow(
        "SELECT p.grow_plan_id, p.farm_id, p.species, p.quantity, p.unit, p.harvested_at,"
        " p.attempts FROM pos_harvest_pushes AS p"
        " WHERE p.state = 'pending' AND p.run_after <= now()"
        " ORDER BY p.run_after, p.created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    )


async def config_for_farm(conn: Connection, farm_id: UUID) -> asyncpg.Record | None:
    """The active configuration that takes the farm's harvests: its agent owner's, else one
    whose owner opted in for the agent or the farm (the oldest); a farm made in the cloud, its
    creator's. Who an agent names as a farm's creator decides nothing: an agent could name
    anyone (issue 24)."""
    return await conn.fetchrow(
        """
        SELECT c.id, c.owner_id, c.environment, c.access_token, c.crop_mappings
        FROM farms AS f
        LEFT JOIN agents AS a ON a.id = f.agent_id
        JOIN pos_configs AS c ON c.is_active AND CASE
            WHEN f.agent_id IS NULL THEN c.owner_id = f.user_id
            ELSE c.owner_id = a.owner_id OR f.agent_id = ANY (c.harvest_agent_ids)
                 OR f.id = ANY (c.harvest_farm_ids)
        END
        WHERE f.id = $1
        ORDER BY (c.owner_id = a.owner_id) IS TRUE DESC, c.created_at, c.id
        LIMIT 1
        """,
        farm_id,
    )


async def finish_push(
    conn: Connection,
    grow_plan_id: UUID,
    state: str,
    *,
    config_id: UUID | None = None,
    variation_id: str | None = None,
    location_id: str | None = None,
    pushed_quantity: Decimal | None = None,
    error: str | None = None,
) -> None:
    """Record the outcome: pushed, unmapped (no configuration or mapping) or failed."""
    await conn.execute(
        """
        UPDATE pos_harvest_pushes SET state = $2, config_id = $3, variation_id = $4,
            location_id = $5, pushed_quantity = $6, error = $7, attempts = attempts + 1,
            pushed_at = CASE WHEN $2 = 'pushed' THEN now() END
        WHERE grow_plan_id = $1
        """,
        grow_plan_id,
        state,
        config_id,
        variation_id,
        location_id,
        pushed_quantity,
        error,
    )


async def retry_push(conn: Connection, grow_plan_id: UUID, error: str, retry_in_s: float) -> None:
    """A transient failure: try again later."""
    await conn.execute(
        "UPDATE pos_harvest_pushes SET attempts = attempts + 1, error = $2,"
        " run_after = now() + make_interval(secs => $3) WHERE grow_plan_id = $1",
        grow_plan_id,
        error,
        retry_in_s,
    )


async def list_pushes(conn: Connection, farm_id: UUID) -> list[asyncpg.Record]:
    """A farm's pushes (system path; for operators and tests)."""
    rows = await conn.fetch(
        "SELECT * FROM pos_harvest_pushes WHERE farm_id = $1 ORDER BY created_at", farm_id
    )
    return list(rows)
