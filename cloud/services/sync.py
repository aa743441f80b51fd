"""Sync apply (DESIGN.md section 8): verify an agent's signed batch, apply it in one
transaction idempotent on (agent_id, seq), and answer the contiguous ack with the identity
delta.

The signature is checked with the agent's registered key before anything is decompressed
(protocol.sync.decode_batch). Refusals: an unknown, unpaired or revoked agent or a bad signature
is 401; a batch naming another agent is 403; the same batch sent twice or one signed too long
ago (a replay) is 409; a batch that verifies but does not parse is 400, an oversized one 413.

Within a verified batch, records are refused one by one and the rest applies: a kind the agent
may not send (unknown, or identity, which flows from the cloud only: protocol/sync_kinds.py) is
counted, logged with the agent's id and listed in the ack's ``rejections``; so is a record the
mirror's confinement refuses (counted only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cloud.services.sync_delta import IdentityDeltaSource
from cloud.store import sync_agents, sync_mirror
from cloud.store.db import Connection, Database
from protocol.errors import BadRequest, Conflict, Forbidden, PayloadTooLarge, Unauthorized
from protocol.sync import (
    Ack,
    Batch,
    BatchRejected,
    Record,
    Rejection,
    advance,
    decode_batch,
    decode_readings,
)
from protocol.sync_kinds import refusal

__all__ = ["SyncService"]

log = logging.getLogger(__name__)

READINGS = "readings"
ROLLUPS = "readings_1m"


class SyncService:
    """Applies agents' batches to the mirror."""

    def __init__(
        self,
        db: Database,
        delta: IdentityDeltaSource,
        *,
        max_skew_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._delta = delta
        self._max_skew_s = max_skew_s
        self._clock = clock

    async def _agent_key(self, agent_id: UUID) -> Ed25519PublicKey:
        async with self._db.as_system() as conn:
            raw = await conn.fetchval(
                "SELECT public_key FROM agents"
                " WHERE id = $1 AND paired_at IS NOT NULL AND revoked_at IS NULL",
                agent_id,
            )
        if raw is None:
            raise Unauthorized("Unknown or unpaired agent")
        return Ed25519PublicKey.from_public_bytes(bytes(raw))

    async def verify(self, agent_header: str | None, signature: str | None, body: bytes) -> Batch:
        """The batch, once its signature, agent and freshness are checked."""
        try:
            agent_id = UUID(agent_header or "")
        except ValueError:
            raise Unauthorized("X-Farm-Agent must name a paired agent") from None
        key = await self._agent_key(agent_id)
        try:
            batch = decode_batch(body, signature or "", key)
        except BatchRejected as err:
            reason = str(err)
            if reason == "bad signature":
                raise Unauthorized("Batch signature does not verify") from None
            if reason == "batch too large":
                raise PayloadTooLarge() from None
            raise BadRequest("Invalid batch", {"reason": reason}) from None
        if batch.agent_id != str(agent_id):
            raise Forbidden("The batch names another agent")
        if abs(self._clock() * 1000 - batch.sent_at) > self._max_skew_s * 1000:
            raise Conflict("Batch signed too long ago (replayed or clock skew)")
        return batch

    async def apply(self, agent_header: str | None, signature: str | None, body: bytes) -> Ack:
        """Verify and apply one batch; answer progress and the identity delta."""
        batch = await self.verify(agent_header, signature, body)
        agent_id = UUID(batch.agent_id)
        async with self._db.as_system() as conn:
            agent = await sync_agents.agent_for_sync(conn, agent_id)
            if agent is None:
                raise Unauthorized("Unknown or unpaired agent")
            if not await sync_agents.remember_batch(conn, agent_id, UUID(batch.batch_id)):
                raise Conflict("Batch already applied (replay)")
            refused = _refused_kinds(agent_id, batch.records)
            refused_seqs = {r.seq for r in refused}
            allowed = tuple(r for r in batch.records if r.seq not in refused_seqs)
            rejected = len(refused)
            rejected += await self._apply_records(conn, agent_id, agent["owner_id"], allowed)
            stored = await sync_agents.add_coverage(conn, agent_id, [])
            acked, pending = advance(int(agent["acked_seq"]), [*stored, *batch.ranges])
            await sync_agents.set_progress(conn, agent_id, acked, pending)
            cutoff = datetime.now(UTC) - timedelta(seconds=2 * self._max_skew_s)
            await sync_agents.prune_batches(conn, cutoff)
        log.debug("agent %s: %d records, acked %d", agent_id, len(batch.records), acked)
        return Ack(
            acked_seq=acked,
            rejected=rejected,
            rejections=refused,
            identity=await self._delta.newer_than(agent_id, batch.identity_version),
        )

    async def _apply_records(
        self, conn: Connection, agent_id: UUID, owner_id: UUID | None, records: tuple[Record, ...]
    ) -> int:
        fresh = await sync_mirror.claim_receipts(
            conn, agent_id, [r.seq for r in records], [r.kind for r in records]
        )
        rejected = 0
        readings = sync_mirror.ReadingRows([], [], [], [], [])
        rollups: list[sync_mirror.RollupRow] = []
        for record in records:
            if record.seq not in fresh:
                continue
            if record.kind == READINGS:
                rejected += _collect_readings(record, readings)
            elif record.kind == ROLLUPS:
                rejected += _collect_rollup(record, rollups)
            else:
                rejected += not await _apply_entity(conn, agent_id, owner_id, record)
        if readings.device_ids:
            rejected += await sync_mirror.insert_readings(conn, agent_id, readings)
        if rollups:
            rejected += await sync_mirror.merge_rollups(conn, agent_id, rollups)
        return rejected


def _refused_kinds(agent_id: UUID, records: tuple[Record, ...]) -> tuple[Rejection, ...]:
    """Records whose kind an agent may not send (protocol/sync_kinds.py): unknown kinds, and
    identity, which flows from the cloud only. Each is refused alone and logged."""
    refused = []
    for record in records:
        reason = refusal(record.kind)
        if reason is None:
            continue
        log.warning(
            "agent %s: %s %s (seq %d) refused: %s",
            agent_id, record.kind, record.key, record.seq, reason,
        )  # fmt: skip
        refused.append(Rejection(seq=record.seq, kind=record.kind, key=record.key, reason=reason))
    return tuple(refused)


def _collect_readings(record: Record, into: sync_mirror.ReadingRows) -> int:
    """Add a reading block's rows; 1 if the block is malformed."""
    try:
        block = decode_readings(record.data)
        device_id = UUID(block.device_id)
    except (BatchRejected, ValueError):
        return 1
    unit = str(record.data.get("u", ""))
    for ts, value in zip(block.timestamps_ms, block.values, strict=True):
        into.device_ids.append(device_id)
        into.metrics.append(block.metric)
        into.stamps_ms.append(ts)
        into.values.append(value)
        into.units.append(unit)
    return 0


def _collect_rollup(record: Record, into: list[sync_mirror.RollupRow]) -> int:
    """Add a 1-minute rollup; 1 if it is malformed."""
    d = record.data
    try:
        into.append(
            sync_mirror.RollupRow(
                device_id=UUID(str(d["device_id"])),
                metric=str(d["metric"]),
                unit=str(d.get("unit", "")),
                bucket_ms=int(d["ts"]),
                vmin=float(d["min"]),
                vmax=float(d["max"]),
                vsum=float(d["sum"]),
                count=int(d["n"]),
            )
        )
    except (KeyError, TypeError, ValueError):
        return 1
    return 0


async def _apply_entity(
    conn: Connection, agent_id: UUID, owner_id: UUID | None, record: Record
) -> bool:
    """One upsert or delete in a savepoint, so a bad record is refused alone."""
    try:
        async with conn.transaction():
            if record.op == "delete":
                await sync_mirror.delete_entity(conn, agent_id, record.kind, record.key)
                return True
            if await sync_mirror.upsert_entity(conn, agent_id, owner_id, record.kind, record.data):
                return True
    except (asyncpg.PostgresError, KeyError, TypeError, ValueError) as err:
        log.warning("agent %s: %s %s refused: %s", agent_id, record.kind, record.key, err)
        return False
    log.warning("agent %s: %s %s is not the agent's", agent_id, record.kind, record.key)
    return False
