"""Sync apply (docs/design.md section 8): verify an agent's signed batch, apply it in one
transaction idempotent on (agent_id, seq), and answer the contiguous ack, the records it refused
and the identity delta.

A batch is applied kind by kind, each in a savepoint: a record the cloud cannot apply (unknown
kind, a kind that does not flow up such as identity, malformed, not the agent's, refused by the
database) is refused alone, with its reason:
kept in the dead-letter table, counted, logged with the agent id and listed in the answer. The
rest of the batch commits, so no record can block an agent's sync for ever.

The signature is checked with the agent's registered key before anything is decompressed
(protocol.sync.decode_batch). Refusals: an unknown, unpaired or revoked agent or a bad signature
is 401; a batch naming another agent is 403; the same batch sent twice or one signed too long
ago (a replay) is 409; a batch that verifies but does not parse is 400, an oversized one 413
(its details carry the limits, so the agent splits the batch and resends).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cloud.services.streams.batch import LiveBatch, missed_by_stream
from cloud.services.sync_delta import IdentityDeltaSource
from cloud.store import live_feed, stream_connections, sync_agents, sync_mirror
from cloud.store import notify as notify_store
from cloud.store.db import Connection, Database
from cloud.store.notify import ContactKeys
from farmkit.secretbox import SecretBoxError
from protocol import sync_kinds
from protocol.errors import BadRequest, Conflict, Forbidden, PayloadTooLarge, Unauthorized
from protocol.sync import (
    MAX_BATCH_BYTES,
    ROLLUP_BLOCK,
    Ack,
    Batch,
    BatchRejected,
    Lane,
    ReadingBlock,
    Record,
    Refusal,
    RollupBlock,
    advance,
    decode_batch,
    decode_readings,
    decode_rollups,
)

__all__ = ["SyncService"]

log = logging.getLogger(__name__)

READINGS = "readings"
ROLLUPS = {"readings_1m": "1m", "readings_1h": "1h"}
"""Rollup record kinds and the mirror's resolution of each."""
# Refusals logged one by one, and listed in the answer, per batch (the rest are counted).
_LOGGED_REFUSALS = 20
_ANSWERED_REFUSALS = 100


class SyncService:
    """Applies agents' batches to the mirror."""

    def __init__(
        self,
        db: Database,
        delta: IdentityDeltaSource,
        *,
        max_skew_s: float,
        max_body_bytes: int,
        clock: Callable[[], float] = time.time,
        contact_keys: ContactKeys | None = None,
    ) -> None:
        self._db = db
        self._contact_keys = contact_keys
        self._max_body_bytes = max_body_bytes
        self._delta = delta
        self._max_skew_s = max_skew_s
        self._clock = clock

    async def _agent_key(self, agent_id: UUID) -> Ed25519PublicKey:
        # One statement, one round trip (no transaction around it); the apply's transaction
        # checks the agent again under its lock.
        async with self._db.statements_as_system() as conn:
            raw = await conn.fetchval(
                "SELECT public_key FROM agents"
                " WHERE id = $1 AND paired_at IS NOT NULL AND revoked_at IS NULL",
                agent_id,
            )
        if raw is None:
            raise Unauthorized("Unknown or unpaired agent")
        return Ed25519PublicKey.from_public_bytes(bytes(raw))

    def limits(self) -> dict[str, int]:
        """What an agent's batch may weigh: compressed body and decompressed JSON."""
        return {"max_body_bytes": self._max_body_bytes, "max_batch_bytes": MAX_BATCH_BYTES}

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
                raise PayloadTooLarge(details=self.limits()) from None
            raise BadRequest("Invalid batch", {"reason": reason}) from None
        if batch.agent_id != str(agent_id):
            raise Forbidden("The batch names another agent")
        now_ms = self._clock() * 1000
        if abs(now_ms - batch.sent_at) > self._max_skew_s * 1000:
            # The cloud's time to the millisecond: an agent whose clock is not set yet signs
            # with it and sends again at once (issue 30).
            raise Conflict(
                "Batch signed too long ago (replayed or clock skew)",
                {"reason": "clock_skew", "cloud_time_ms": int(now_ms)},
            )
        return batch

    async def apply(self, agent_header: str | None, signature: str | None, body: bytes) -> Ack:
        """Verify and apply one batch; answer progress, refusals and the identity delta."""
        batch = await self.verify(agent_header, signature, body)
        agent_id = UUID(batch.agent_id)
        async with self._db.as_system() as conn:
            agent = await sync_agents.agent_for_sync(conn, agent_id)
            if agent is None:
                raise Unauthorized("Unknown or unpaired agent")
            if not await sync_agents.remember_batch(conn, agent_id, UUID(batch.batch_id)):
                raise Conflict("Batch already applied (replay)")
            live = LiveBatch()
            refused = await _apply_records(
                conn,
                agent_id,
                agent["owner_id"],
                int(agent["acked_seq"]),
                batch.records,
                live,
                self._contact_keys,
            )
            if refused:
                await sync_mirror.dead_letter(
                    conn, agent_id, [(r.seq, r.kind, r.key, r.reason, d) for r, d in refused]
                )
            stored = await sync_agents.add_coverage(conn, agent_id, [])
            acked, pending = advance(int(agent["acked_seq"]), [*stored, *batch.ranges])
            cutoff = datetime.now(UTC) - timedelta(seconds=2 * self._max_skew_s)
            await sync_agents.set_progress(conn, agent_id, acked, pending, cutoff)
            # Delivered to every process's stream clients only once this transaction commits.
            if live.events:
                counts = {s.value: n for s, n in missed_by_stream(live.events).items()}
                listened = await stream_connections.any_open(conn)
                await live_feed.announce(conn, live.events, counts, listened=listened)
        for refusal, _ in refused[:_LOGGED_REFUSALS]:
            log.warning(
                "agent %s: %s %s (seq %d) refused: %s",
                agent_id, refusal.kind, refusal.key, refusal.seq, refusal.reason,
            )  # fmt: skip
        log.debug("agent %s: %d records, acked %d", agent_id, len(batch.records), acked)
        return Ack(
            acked_seq=acked,
            rejected=len(refused),
            refused=tuple(r for r, _ in refused[:_ANSWERED_REFUSALS]),
            max_batch_bytes=MAX_BATCH_BYTES,
            max_body_bytes=self._max_body_bytes,
            identity=await self._delta.newer_than(agent_id, batch.identity_version),
        )


Refused = list[tuple[Refusal, dict[str, Any]]]


def screen(record: Record) -> str | None:
    """Why the cloud takes no record of this kind from an agent (``None``: it may apply it):
    a kind it does not know, or one that does not flow up (identity flows from the cloud only,
    protocol/sync_kinds.py)."""
    return sync_kinds.refusal(record.kind)


async def _apply_records(
    conn: Connection,
    agent_id: UUID,
    owner_id: UUID | None,
    acked_seq: int,
    records: tuple[Record, ...],
    live: LiveBatch,
    contact_keys: ContactKeys | None = None,
) -> Refused:
    """Apply a batch kind by kind, each in a savepoint: a record that cannot be applied is
    refused alone (with its reason) and the rest commits. What changed is told to ``live``."""
    refused: Refused = []

    def refuse(record: Record, reason: str) -> None:
        refused.append((Refusal(seq=record.seq, kind=record.kind, key=record.key, reason=reason),
                        record.data))  # fmt: skip

    # A rollup block carries a number per rollup and is claimed rollup by rollup.
    rollup_blocks: list[tuple[Record, RollupBlock]] = []
    for record in records:
        if record.kind == ROLLUP_BLOCK:
            try:
                rollup_blocks.append((record, decode_rollups(record.data)))
            except BatchRejected as err:
                refuse(record, str(err))
    seqs = [r.seq for r in records if r.kind != ROLLUP_BLOCK]
    seqs += [seq for _, block in rollup_blocks for seq in block.seqs]
    fresh = await sync_agents.claim_receipts(conn, agent_id, acked_seq, seqs)

    blocks: list[tuple[Record, ReadingBlock, UUID]] = []
    rollups: list[tuple[Record, sync_mirror.RollupRow]] = []
    for record in records:
        if record.kind == ROLLUP_BLOCK or record.seq not in fresh:
            continue
        reason = screen(record)
        if reason is not None:
            refuse(record, reason)
        elif record.kind == READINGS:
            try:
                block = decode_readings(record.data)
                blocks.append((record, block, UUID(block.device_id)))
            except (BatchRejected, ValueError) as err:
                refuse(record, f"malformed reading block: {err}")
        elif record.kind in ROLLUPS:
            try:
                rollups.append((record, _rollup(record)))
            except (KeyError, TypeError, ValueError) as err:
                refuse(record, f"malformed rollup: {err!r}")
        elif record.kind in ("contact_points", "notifications"):
            reason = await _apply_contact_point(conn, agent_id, record, contact_keys)
            if reason is not None:
                refuse(record, reason)
        else:
            reason = await _apply_entity(conn, agent_id, owner_id, record, live)
            if reason is not None:
                refuse(record, reason)
    rollups += _fresh_rollups(rollup_blocks, fresh)
    if any(r.kind in _BRINGS_DEVICES and r.seq in fresh for r in records):
        _add_released(await sync_mirror.release_held(conn, agent_id), blocks, rollups)
    devices = [device_id for _, _, device_id in blocks] + [r.device_id for _, r in rollups]
    mine = await sync_mirror.own_devices(conn, agent_id, devices) if devices else {}
    # A device the mirror does not hold at all is one whose record has not arrived yet: its
    # readings wait for it (issue 30). One on another agent's farm is refused.
    missing = set(devices) - set(mine)
    known = await sync_mirror.known_devices(conn, list(missing)) if missing else set()
    held: list[tuple[UUID, int, str, str, dict[str, Any]]] = []
    not_mine = "device is not on one of the agent's farms"
    readings = sync_mirror.ReadingRows()
    applied_blocks = []
    for record, block, device_id in blocks:
        if device_id not in mine:
            if device_id in known:
                refuse(record, not_mine)
            else:
                held.append((device_id, record.seq, record.kind, record.key, record.data))
            continue
        applied_blocks.append((record, block, device_id))
        unit = str(record.data.get("u", ""))
        readings.add(device_id, block.metric, unit, block.timestamps_ms, block.values)
    applied_rollups = []
    refused_blocks: set[int] = set()
    for record, rollup in rollups:
        if rollup.device_id not in mine:
            if rollup.device_id not in known:
                held.append(_held_rollup(record, rollup))
            elif record.seq not in refused_blocks:
                refuse(record, not_mine)
                refused_blocks.add(record.seq)
            continue
        applied_rollups.append((record, rollup))
    if held:
        await sync_mirror.hold(conn, agent_id, held)
        log.info("agent %s: %d reading records held until their device arrives",
                 agent_id, len(held))  # fmt: skip
    # Each kind goes in as one statement; should the database refuse it, its records go in one
    # by one, so that only the records it refuses are refused and the rest of the batch lands.
    if readings.device_ids:
        whole = await _insert_readings(conn, agent_id, readings) is None
        for record, block, device_id in applied_blocks:
            if not whole:
                alone = sync_mirror.ReadingRows()
                alone.add(device_id, block.metric, str(record.data.get("u", "")),
                          block.timestamps_ms, block.values)  # fmt: skip
                if (reason := await _insert_readings(conn, agent_id, alone)) is not None:
                    refuse(record, reason)
                    continue
            _tell_readings(live, str(mine[device_id]), record, block)
    if applied_rollups:
        merge = sync_mirror.merge_rollups(conn, agent_id, [r for _, r in applied_rollups])
        if await _in_savepoint(conn, merge) is not None:
            by_record: dict[int, tuple[Record, list[sync_mirror.RollupRow]]] = {}
            for record, rollup in applied_rollups:
                by_record.setdefault(record.seq, (record, []))[1].append(rollup)
            for record, rows in by_record.values():
                merge = sync_mirror.merge_rollups(conn, agent_id, rows)
                if (reason := await _in_savepoint(conn, merge)) is not None:
                    refuse(record, reason)
    return refused


_BRINGS_DEVICES = ("devices", "farms")
"""Records that may put a device on one of the agent's farms (a device's own, or its farm's)."""
_KIND_OF = {resolution: kind for kind, resolution in ROLLUPS.items()}


def _add_released(
    released: list[Any],
    blocks: list[tuple[Record, ReadingBlock, UUID]],
    rollups: list[tuple[Record, sync_mirror.RollupRow]],
) -> None:
    """Held records whose device has arrived, back among the batch's readings and rollups."""
    for row in sorted(released, key=lambda r: int(r["id"])):
        record = Record(
            seq=int(row["seq"]),
            lane=Lane.BULK,
            kind=str(row["kind"]),
            op="upsert",
            key=str(row["key"]),
            data=_json_value(row["data"]),
        )
        if record.kind == READINGS:
            block = decode_readings(record.data)
            blocks.append((record, block, UUID(block.device_id)))
        else:
            rollups.append((record, _rollup(record)))


def _held_rollup(
    record: Record, rollup: sync_mirror.RollupRow
) -> tuple[UUID, int, str, str, dict[str, Any]]:
    """A rollup to hold, as the record of its own that :func:`_rollup` reads back."""
    data = {
        "device_id": str(rollup.device_id),
        "metric": rollup.metric,
        "unit": rollup.unit,
        "ts": rollup.bucket_ms,
        "min": rollup.vmin,
        "max": rollup.vmax,
        "sum": rollup.vsum,
        "n": rollup.count,
    }
    return rollup.device_id, record.seq, _KIND_OF[rollup.resolution], record.key, data


def _fresh_rollups(
    blocks: list[tuple[Record, RollupBlock]], fresh: set[int]
) -> list[tuple[Record, sync_mirror.RollupRow]]:
    """The rollups of ``blocks`` not applied before (each claimed by its own number)."""
    rows = []
    for record, block in blocks:
        device_id = UUID(block.device_id)
        for seq, bucket, vmin, vmax, vsum, count in zip(
            block.seqs, block.buckets_ms, block.mins, block.maxes, block.sums, block.counts,
            strict=True,
        ):  # fmt: skip
            if seq in fresh:
                rows.append((record, sync_mirror.RollupRow(
                    device_id, block.metric, block.unit, block.width, bucket, vmin, vmax, vsum,
                    count)))  # fmt: skip
    return rows


async def _insert_readings(
    conn: Connection, agent_id: UUID, rows: sync_mirror.ReadingRows
) -> str | None:
    """Insert readings in a savepoint; the database's refusal, if it refused. A batch's
    readings are nearly always all new: they go in as a plain insert, a fifth to a quarter
    cheaper than one that checks every row for a conflict first (docs/adr/0039-cloud-readings.md).
    Should one be stored already (re-sent under new numbers, or twice in the batch), that
    insert fails and rolls back whole, and they go in again skipping what is stored."""
    try:
        async with conn.transaction():
            await sync_mirror.insert_readings(conn, agent_id, rows, skip_stored=False)
    except asyncpg.UniqueViolationError:
        return await _in_savepoint(conn, sync_mirror.insert_readings(conn, agent_id, rows))
    except (asyncpg.PostgresError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return None


async def _in_savepoint(conn: Connection, work: Coroutine[Any, Any, None]) -> str | None:
    """Run ``work`` in a savepoint; the database's refusal, if it refused."""
    try:
        async with conn.transaction():
            await work
    except (asyncpg.PostgresError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def _tell_readings(live: LiveBatch, farm_id: str, record: Record, block: ReadingBlock) -> None:
    """The stream messages of a reading block just stored."""
    live.readings(
        farm_id,
        block.device_id,
        block.metric,
        str(record.data.get("u", "")),
        list(block.timestamps_ms),
        list(block.values),
    )


def _rollup(record: Record) -> sync_mirror.RollupRow:
    """A rollup record as a row (raises on a malformed one)."""
    d = record.data
    count = int(d["n"])
    if count < 1:
        raise ValueError("a rollup counts at least one reading")
    return sync_mirror.RollupRow(
        device_id=UUID(str(d["device_id"])),
        metric=str(d["metric"]),
        unit=str(d.get("unit", "")),
        resolution=ROLLUPS[record.kind],
        bucket_ms=int(d["ts"]),
        vmin=float(d["min"]),
        vmax=float(d["max"]),
        vsum=float(d["sum"]),
        count=count,
    )


async def _apply_entity(
    conn: Connection, agent_id: UUID, owner_id: UUID | None, record: Record, live: LiveBatch
) -> str | None:
    """One upsert or delete in a savepoint, so a bad record is refused alone; why it was."""
    try:
        async with conn.transaction():
            if record.op == "delete":
                await sync_mirror.delete_entity(conn, agent_id, record.kind, record.key)
                if record.kind == "farms":
                    live.farm_deleted(record.key, datetime.now(UTC))
                return None
            before = None
            if record.kind == "devices":
                before = await sync_mirror.device_state(conn, agent_id, record.key)
            inserted = await sync_mirror.upsert_entity(
                conn, agent_id, owner_id, record.kind, record.data
            )
            if inserted is not None:
                _tell_entity(live, record, inserted, before)
                return None
    except (asyncpg.PostgresError, KeyError, TypeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return "not one of the agent's farms"


async def _apply_contact_point(
    conn: Connection, agent_id: UUID, record: Record, keys: ContactKeys | None
) -> str | None:
    """A contact point of the agent's (its URL, sealed to the cloud, opened and sealed under
    the cloud's own key), or a message it handed over; why not."""
    if keys is None:
        return "this cloud keeps no contact points"
    try:
        async with conn.transaction():
            if record.kind == "notifications":
                if await notify_store.apply_handover(conn, agent_id, record.data) is None:
                    return "not one of the agent's farms or contact points"
                return None
            if record.op == "delete":
                await notify_store.delete_contact_point(conn, agent_id, record.key)
                return None
            if await notify_store.apply_contact_point(conn, agent_id, record.data, keys) is None:
                return "not one of the agent's farms"
    except (asyncpg.PostgresError, KeyError, TypeError, ValueError, SecretBoxError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def _tell_entity(live: LiveBatch, record: Record, inserted: bool, before: Any) -> None:
    """The stream messages of an entity just written to the mirror."""
    if record.kind == "events" and inserted:
        live.event({**record.data, "data": _json_value(record.data.get("data")) or {}})
    elif record.kind == "climate_history" and inserted:
        live.climate({**record.data, "data": _json_value(record.data.get("data")) or {}})
    elif record.kind == "devices":
        state = _json_value(record.data.get("state"))
        if state and state != before:
            live.device_state(record.data, state)


def _json_value(value: Any) -> Any:
    """A JSON column the agent's trigger may have written as text, as a value."""
    return json.loads(value) if isinstance(value, str) else value
