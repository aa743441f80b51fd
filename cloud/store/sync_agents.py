"""Agents as sync sees them: creation with a pairing code, redemption, keys and progress.

Creation runs on the user path (an admin, under row-level security); everything the agent
itself calls runs on the system path, since an agent is no user (docs/cloud-rls.md).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from datetime import datetime, timedelta
from uuid import UUID

import asyncpg

from cloud.store.db import Connection
from protocol.sync import merge_ranges

__all__ = [
    "add_coverage",
    "agent_exists",
    "agent_for_sync",
    "claim_receipts",
    "create_agent",
    "list_agents",
    "redeem_pairing",
    "remember_batch",
    "revoke_agent",
    "set_progress",
]


async def create_agent(
    conn: Connection, name: str, owner_id: UUID, code_hash: bytes, ttl: timedelta
) -> asyncpg.Record:
    """A new, unpaired agent with a pairing code that expires after ``ttl`` (user path)."""
    row = await conn.fetchrow(
        "INSERT INTO agents (name, owner_id, pairing_code_hash, pairing_expires_at)"
        " VALUES ($1, $2, $3, now() + $4) RETURNING id, name, owner_id, pairing_expires_at",
        name,
        owner_id,
        code_hash,
        ttl,
    )
    assert row is not None  # INSERT ... RETURNING yields its row or raises
    return row


async def list_agents(
    conn: Connection, revoked: bool | None, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """Agents the caller may see, newest first, and their total (user path: row-level security
    shows admins every agent and owners theirs)."""
    where = " WHERE ($1::boolean IS NULL OR (revoked_at IS NOT NULL) = $1)"
    rows = await conn.fetch(
        "SELECT id, name, owner_id, paired_at, pairing_expires_at, last_seen_at, acked_seq,"
        " refused_records,"
        f" revoked_at, created_at FROM agents{where}"
        " ORDER BY created_at DESC, id LIMIT $2 OFFSET $3",
        revoked,
        limit,
        offset,
    )
    total = await conn.fetchval(f"SELECT count(*) FROM agents{where}", revoked)
    return rows, int(total)


async def revoke_agent(conn: Connection, agent_id: UUID) -> bool:
    """Revoke an agent: its key signs nothing the cloud accepts any more, and a pending pairing
    code dies with it. Revoking twice keeps the first time. False when the caller may not update
    the agent or there is none (user path: only admins may update agents)."""
    revoked: UUID | None = await conn.fetchval(
        "UPDATE agents SET revoked_at = coalesce(revoked_at, now()),"
        " pairing_code_hash = NULL, pairing_expires_at = NULL"
        " WHERE id = $1 RETURNING id",
        agent_id,
    )
    return revoked is not None


async def redeem_pairing(conn: Connection, code_hash: bytes, public_key: bytes) -> UUID | None:
    """Register ``public_key`` for the agent whose live, unused code hashes to ``code_hash``;
    the code is consumed. ``None`` when no such code exists (system path)."""
    agent_id: UUID | None = await conn.fetchval(
        "UPDATE agents SET public_key = $2, paired_at = now(),"
        " pairing_code_hash = NULL, pairing_expires_at = NULL"
        " WHERE pairing_code_hash = $1 AND pairing_expires_at > now() AND revoked_at IS NULL"
        " RETURNING id",
        code_hash,
        public_key,
    )
    return agent_id


async def agent_for_sync(conn: Connection, agent_id: UUID) -> asyncpg.Record | None:
    """A paired, unrevoked agent's key, owner and progress, locked for this transaction so
    two batches of one agent apply one after the other (system path)."""
    return await conn.fetchrow(
        "SELECT id, owner_id, public_key, acked_seq FROM agents"
        " WHERE id = $1 AND paired_at IS NOT NULL AND revoked_at IS NULL FOR UPDATE",
        agent_id,
    )


async def agent_exists(conn: Connection, agent_id: UUID) -> bool:
    """Whether the agent exists (system path)."""
    return bool(await conn.fetchval("SELECT true FROM agents WHERE id = $1", agent_id))


async def remember_batch(conn: Connection, agent_id: UUID, batch_id: UUID) -> bool:
    """Record a batch id; ``False`` if it was applied before (a replay)."""
    inserted = await conn.fetchval(
        "INSERT INTO sync_batches (agent_id, batch_id) VALUES ($1, $2)"
        " ON CONFLICT DO NOTHING RETURNING true",
        agent_id,
        batch_id,
    )
    return bool(inserted)


async def add_coverage(
    conn: Connection, agent_id: UUID, ranges: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Store ranges above the ack and return every stored range of the agent."""
    if ranges:
        await conn.execute(
            "INSERT INTO sync_coverage (agent_id, lo, hi)"
            " SELECT $1, r.lo, r.hi FROM unnest($2::bigint[], $3::bigint[]) AS r (lo, hi)"
            " ON CONFLICT DO NOTHING",
            agent_id,
            [lo for lo, _ in ranges],
            [hi for _, hi in ranges],
        )
    rows = await conn.fetch("SELECT lo, hi FROM sync_coverage WHERE agent_id = $1", agent_id)
    return [(int(r["lo"]), int(r["hi"])) for r in rows]


async def set_progress(
    conn: Connection,
    agent_id: UUID,
    acked_seq: int,
    pending: list[tuple[int, int]],
    forget_before: datetime,
) -> None:
    """Advance the contiguous ack, keep only the ranges still above it, stamp last_seen_at, and
    forget batch ids received before ``forget_before`` (their batches are too old to be
    accepted anyway): one statement, one round trip. The ranges kept are not deleted and those
    deleted are not inserted, so no row is touched twice."""
    await conn.execute(
        """
        WITH kept AS (
            SELECT r.lo, r.hi FROM unnest($3::bigint[], $4::bigint[]) AS r (lo, hi)
        ), progress AS (
            UPDATE agents SET acked_seq = $2, last_seen_at = now() WHERE id = $1
        ), passed AS (
            DELETE FROM sync_coverage AS c WHERE c.agent_id = $1
                AND NOT EXISTS (SELECT 1 FROM kept AS k WHERE k.lo = c.lo AND k.hi = c.hi)
        ), forgotten AS (
            DELETE FROM sync_batches WHERE received_at < $5
        )
        INSERT INTO sync_coverage (agent_id, lo, hi) SELECT $1, k.lo, k.hi FROM kept AS k
        ON CONFLICT DO NOTHING
        """,
        agent_id,
        acked_seq,
        [lo for lo, _ in pending],
        [hi for _, hi in pending],
        forget_before,
    )


async def claim_receipts(
    conn: Connection, agent_id: UUID, acked_seq: int, seqs: Iterable[int]
) -> set[int]:
    """Those of ``seqs`` not applied before, now recorded as applied (idempotence): a number at
    or below the agent's ``acked_seq`` or inside one of its receipt ranges was. The ranges are
    kept merged, and those the ack has passed are dropped (the caller holds the agent's lock)."""
    rows = await conn.fetch(
        "DELETE FROM sync_receipt_ranges WHERE agent_id = $1 RETURNING lo, hi", agent_id
    )
    held = merge_ranges((int(r["lo"]), int(r["hi"])) for r in rows if r["hi"] > acked_seq)
    fresh = {seq for seq in seqs if seq > acked_seq and not _within(seq, held)}
    kept = merge_ranges([*held, *((seq - 1, seq) for seq in fresh)])
    if kept:
        await conn.execute(
            "INSERT INTO sync_receipt_ranges (agent_id, lo, hi)"
            " SELECT $1, r.lo, r.hi FROM unnest($2::bigint[], $3::bigint[]) AS r (lo, hi)",
            agent_id,
            [lo for lo, _ in kept],
            [hi for _, hi in kept],
        )
    return fresh


def _within(seq: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``seq`` lies in one of the merged, ordered ranges ``(lo, hi]``."""
    at = bisect.bisect_left(ranges, (seq, seq)) - 1
    return at >= 0 and ranges[at][0] < seq <= ranges[at][1]
