"""The sync wire format between agent and cloud (docs/design.md section 8).

A batch is JSON, gzip-compressed, and signed with the agent's Ed25519 key over the compressed
bytes, so the cloud verifies before it decompresses anything. Each record carries the agent's
monotonic sequence number; the cloud applies a batch in one transaction, idempotent on
(agent_id, seq), and answers the highest contiguous sequence it has committed.

Readings travel as blocks, one per series, columnar and delta-encoded (timestamps as differences
in milliseconds, values scaled to integers), which is what keeps a reading to a few bytes on the
wire after gzip.
"""

from __future__ import annotations

import base64
import gzip
import json
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import accumulate, pairwise
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "MAX_BATCH_BYTES",
    "ROLLUP_BLOCK",
    "Ack",
    "Batch",
    "BatchRejected",
    "IdentityDelta",
    "Lane",
    "ReadingBlock",
    "Record",
    "Refusal",
    "ReplicaApiKey",
    "ReplicaPermission",
    "ReplicaSession",
    "ReplicaUser",
    "RollupBlock",
    "batch_size",
    "decode_batch",
    "decode_readings",
    "decode_rollups",
    "encode_batch",
    "encode_readings",
    "encode_rollups",
    "pack_batch",
]

MAX_BATCH_BYTES = 4 * 1024 * 1024
"""Decompressed size limit: a batch over it is refused (and guards against gzip bombs)."""

SIGNATURE_HEADER = "X-Farm-Signature"
AGENT_HEADER = "X-Farm-Agent"


class Lane(IntEnum):
    """Priority of a record: events, configuration and calibrations go before bulk readings."""

    PRIORITY = 0
    BULK = 1


class BatchRejected(Exception):
    """A batch failed verification or validation; the reason says which."""


class Record(BaseModel):
    """One change: an upsert or delete of an entity, or a block of readings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=1)
    lane: Lane
    kind: str = Field(min_length=1, max_length=64)
    op: Literal["upsert", "delete"]
    key: str = Field(min_length=1, max_length=200)
    data: dict[str, Any] = Field(default_factory=dict)


class Batch(BaseModel):
    """What the agent uploads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str
    batch_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    sent_at: int = Field(description="Unix ms when signed; the cloud refuses stale batches")
    records: tuple[Record, ...]
    ranges: tuple[tuple[int, int], ...] = Field(
        default=(),
        description=(
            "Sequence ranges (lo, hi] this batch accounts for: its records, plus numbers the "
            "agent no longer holds (rolled up or superseded). The cloud's contiguous ack grows "
            "over these, so holes in the agent's sequence never stall it."
        ),
    )
    identity_version: int = Field(
        0,
        ge=0,
        description=(
            "The identity version the agent holds: the cloud leaves the delta out of its answer "
            "when it has nothing newer"
        ),
    )


class ReplicaUser(BaseModel):
    """A cloud user with access to one of the agent's farms (docs/design.md section 8)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    email: str
    role: str
    plan: str
    status: str
    password_hash: str | None
    mfa_enabled: bool = False
    """With MFA on, the agent refuses the password alone: such a user signs in through the cloud
    (which asks for the second factor) and the agent accepts the cloud's tokens."""


class ReplicaPermission(BaseModel):
    """A per-farm permission of a replicated user on one of the agent's farms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    user_id: str
    farm_id: str
    permission_type: str


class ReplicaSession(BaseModel):
    """A cloud session of a replicated user: the agent accepts its tokens until it is revoked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    user_id: str
    created_at: str
    expires_at: str
    revoked_at: str | None


class ReplicaApiKey(BaseModel):
    """A cloud API key of a replicated user: the agent accepts it until it is revoked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    user_id: str
    name: str
    prefix: str
    key_hash: str = Field(description="protocol.tokens.hash_secret of the key (hex)")
    created_at: str
    expires_at: str | None
    revoked_at: str | None


class IdentityDelta(BaseModel):
    """Who may use the agent's farms, as the cloud (the identity authority) sees it now.

    Identity flows only this way (protocol/sync_kinds.py): the agent keeps a replica and never
    sends it back. ``version`` is the cloud's identity version of the snapshot the delta was read
    in; the agent applies only a delta newer than the one it holds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str
    public_key: str = Field(description="The cloud's token key, JWK `x` (base64url raw Ed25519)")
    version: int = Field(0, ge=0, description="The cloud's identity version; 0 from old clouds")
    users: tuple[ReplicaUser, ...] = ()
    permissions: tuple[ReplicaPermission, ...] = ()
    sessions: tuple[ReplicaSession, ...] = ()
    api_keys: tuple[ReplicaApiKey, ...] = ()


class Refusal(BaseModel):
    """A record of a batch the cloud could not apply: kept in its dead-letter table, never
    retried; the rest of the batch commits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=1)
    kind: str
    key: str
    reason: str


class Ack(BaseModel):
    """What the cloud answers: progress, the records it refused, its batch limit, and the
    identity the agent needs offline. Fields a newer cloud adds are ignored, so an agent keeps
    syncing while its cloud is upgraded first."""

    model_config = ConfigDict(extra="ignore")

    acked_seq: int = Field(ge=0)
    rejected: int = Field(0, ge=0, description="Records of this batch the cloud refused")
    refused: tuple[Refusal, ...] = Field(
        default=(), description="The refused records and why (at most the first 100)"
    )
    max_batch_bytes: int = Field(
        MAX_BATCH_BYTES, ge=1, description="The cloud's limit on a batch, decompressed JSON"
    )
    max_body_bytes: int | None = Field(
        None, ge=1, description="The cloud's limit on a request body (the gzip bytes)"
    )
    identity: IdentityDelta | None = Field(
        None, description="Left out when the agent already holds the current identity version"
    )


def batch_size(batch: Batch) -> int:
    """A batch's size as the cloud measures it against its limit: the decompressed JSON."""
    return len(batch.model_dump_json().encode())


def encode_batch(batch: Batch, key: Ed25519PrivateKey) -> tuple[bytes, str]:
    """Compress and sign a batch; return the body and the base64 signature header value."""
    _, body, signature = pack_batch(batch, key)
    return body, signature


def pack_batch(batch: Batch, key: Ed25519PrivateKey) -> tuple[int, bytes, str]:
    """:func:`batch_size` and :func:`encode_batch` at the cost of one JSON encoding."""
    # The JSON as bytes straight from the serializer: ``model_dump_json().encode()`` holds it
    # twice (str and bytes), megabytes for a batch of a backlog.
    raw = batch.__pydantic_serializer__.to_json(batch)
    body = gzip.compress(raw, compresslevel=6, mtime=0)
    return len(raw), body, base64.b64encode(key.sign(body)).decode()


def decode_batch(body: bytes, signature: str, key: Ed25519PublicKey) -> Batch:
    """Verify, decompress (bounded) and validate a batch, or raise :class:`BatchRejected`."""
    try:
        key.verify(base64.b64decode(signature, validate=True), body)
    except (InvalidSignature, ValueError) as err:
        raise BatchRejected("bad signature") from err
    inflater = zlib.decompressobj(wbits=31)
    try:
        raw = inflater.decompress(body, MAX_BATCH_BYTES + 1)
    except zlib.error as err:
        raise BatchRejected("not gzip") from err
    if len(raw) > MAX_BATCH_BYTES or inflater.unconsumed_tail:
        raise BatchRejected("batch too large")
    try:
        return Batch.model_validate_json(raw)
    except ValidationError as err:
        raise BatchRejected(f"invalid batch: {err.errors(include_url=False)[:3]}") from err


@dataclass(frozen=True, slots=True)
class ReadingBlock:
    """Readings of one series (device and metric), ordered by time."""

    device_id: str
    metric: str
    timestamps_ms: Sequence[int]
    values: Sequence[float]


def _scale_for(values: Iterable[float]) -> int:
    """Decimal places needed (at most 4): sensors report a few, and fewer digits compress."""
    for places in range(5):
        factor = 10**places
        if all(abs(v * factor - round(v * factor)) < 1e-6 for v in values):
            return places
    return 4


def encode_readings(block: ReadingBlock) -> dict[str, Any]:
    """A block as record data: first timestamp, time deltas and scaled integer values."""
    stamps = list(block.timestamps_ms)
    if not stamps or len(stamps) != len(block.values):
        raise ValueError("a block needs matching, non-empty timestamps and values")
    places = _scale_for(block.values)
    factor = 10**places
    return {
        "device_id": block.device_id,
        "metric": block.metric,
        "t0": stamps[0],
        "dt": [b - a for a, b in pairwise(stamps)],
        "p": places,
        "v": [round(v * factor) for v in block.values],
    }


def decode_readings(data: dict[str, Any]) -> ReadingBlock:
    """The inverse of :func:`encode_readings`; raises :class:`BatchRejected` on bad shapes."""
    try:
        t0 = int(data["t0"])
        deltas = [int(d) for d in data["dt"]]
        factor = 10 ** int(data["p"])
        values = [int(v) / factor for v in data["v"]]
        device_id, metric = str(data["device_id"]), str(data["metric"])
    except (KeyError, TypeError, ValueError) as err:
        raise BatchRejected("malformed reading block") from err
    if len(values) != len(deltas) + 1 or not 0 <= int(data["p"]) <= 4:
        raise BatchRejected("reading block lengths disagree")
    return ReadingBlock(device_id, metric, list(accumulate(deltas, initial=t0)), values)


ROLLUP_BLOCK = "rollups"
"""Record kind of a block of rollups of one series and width: columns, one entry per rollup,
each with its own sequence number (``s``), so the cloud applies each exactly once however a
resend groups them."""
ROLLUP_WIDTHS = {"1m": 60_000, "1h": 3_600_000}


@dataclass(frozen=True, slots=True)
class RollupBlock:
    """Rollups of one series (device and metric) and one width, each a bucket's min, max, sum
    and count, numbered by the agent's sequence."""

    device_id: str
    metric: str
    unit: str
    width: str
    seqs: Sequence[int]
    buckets_ms: Sequence[int]
    mins: Sequence[float]
    maxes: Sequence[float]
    sums: Sequence[float]
    counts: Sequence[int]


def encode_rollups(block: RollupBlock) -> dict[str, Any]:
    """A rollup block as record data."""
    return {
        "device_id": block.device_id, "metric": block.metric, "unit": block.unit,
        "w": block.width, "s": list(block.seqs), "t": list(block.buckets_ms),
        "min": list(block.mins), "max": list(block.maxes), "sum": list(block.sums),
        "n": list(block.counts),
    }  # fmt: skip


def decode_rollups(data: dict[str, Any]) -> RollupBlock:
    """The inverse of :func:`encode_rollups`; raises :class:`BatchRejected` on bad shapes."""
    try:
        block = RollupBlock(
            device_id=str(uuid.UUID(str(data["device_id"]))),
            metric=str(data["metric"]),
            unit=str(data.get("unit", "")),
            width=str(data["w"]),
            seqs=[int(v) for v in data["s"]],
            buckets_ms=[int(v) for v in data["t"]],
            mins=[float(v) for v in data["min"]],
            maxes=[float(v) for v in data["max"]],
            sums=[float(v) for v in data["sum"]],
            counts=[int(v) for v in data["n"]],
        )
    except (KeyError, TypeError, ValueError) as err:
        raise BatchRejected("malformed rollup block") from err
    columns = (block.seqs, block.buckets_ms, block.mins, block.maxes, block.sums, block.counts)
    if block.width not in ROLLUP_WIDTHS or len({len(c) for c in columns}) != 1:
        raise BatchRejected("rollup block columns disagree")
    if min(block.counts, default=1) < 1 or min(block.seqs, default=1) < 1:
        raise BatchRejected("a rollup counts at least one reading, under a positive number")
    return block


def dumps(data: Any) -> str:
    """Compact JSON, as records are stored in the outbox."""
    return json.dumps(data, separators=(",", ":"))


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open ranges ``(lo, hi]`` merged where they touch or overlap, in order."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def advance(acked: int, ranges: Iterable[tuple[int, int]]) -> tuple[int, list[tuple[int, int]]]:
    """The highest contiguous sequence from ``acked`` over ``ranges``, and the ranges still
    above it (not yet reachable)."""
    rest = []
    for lo, hi in merge_ranges(ranges):
        if lo <= acked:
            acked = max(acked, hi)
        elif hi > acked:
            rest.append((lo, hi))
    return acked, rest
