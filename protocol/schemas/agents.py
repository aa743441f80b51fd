"""Agents and pairing (docs/design.md section 8): what an admin and a pairing agent send and get."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from protocol.schemas.auth import UuidIn
from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

__all__ = [
    "Agent",
    "AgentCreate",
    "AgentCreated",
    "AgentList",
    "AgentListQuery",
    "DeadLetter",
    "DeadLetterList",
    "PairRequest",
    "PairResult",
    "SealingKey",
]


class AgentCreate(ApiModel):
    """POST /api/v1/agents: a farm site to be paired."""

    name: str = Field(min_length=1, max_length=200)
    owner_id: UuidIn | None = Field(None, description="The agent's owner; the caller by default")


class AgentCreated(Schema):
    """The new agent and its one-time pairing code, shown only here."""

    id: Uuid
    name: str
    owner_id: Uuid
    pairing_code: str
    pairing_expires_at: Timestamp


class PairRequest(ApiModel):
    """POST /api/v1/agents/pair: redeem a code with the agent's public key."""

    code: str = Field(min_length=8, max_length=100)
    public_key: str = Field(
        min_length=40, max_length=50, description="Raw Ed25519 public key, base64url (RFC 8037 x)"
    )


class PairResult(Schema):
    """Who the agent now is, and the key that verifies the cloud's tokens."""

    agent_id: Uuid
    cloud_issuer: str
    cloud_public_key: str = Field(description="JWK `x` of the cloud's token key")


class SealingKey(Schema):
    """The cloud's public key for secrets only it may read (a contact point's URL), signed
    with its token key so that an agent checks it against the key it got at pairing."""

    key: str = Field(description="Raw X25519 public key, base64url")
    signature: str = Field(description="Ed25519 signature of the token key over the key, base64url")


class Agent(Schema):
    """An agent as the cloud knows it: pairing state and sync progress."""

    id: Uuid
    name: str
    owner_id: Uuid | None
    paired: bool
    paired_at: Timestamp | None
    pairing_expires_at: Timestamp | None = Field(
        description="While a pairing code is outstanding, when it expires"
    )
    last_seen_at: Timestamp | None = Field(description="The last batch the cloud accepted")
    acked_seq: int = Field(description="Highest contiguous outbox sequence applied here")
    refused_records: int = Field(
        0, description="Records of the agent's batches the cloud refused (its dead letters)"
    )
    revoked_at: Timestamp | None
    created_at: Timestamp


class AgentList(Schema):
    """GET /api/v1/agents: admins see every agent, owners theirs."""

    agents: list[Agent]
    total: int
    limit: int
    offset: int


class AgentListQuery(PageQuery):
    """Query of GET /api/v1/agents."""

    revoked: bool | None = Field(None, description="Only revoked (true) or active (false) agents")


class DeadLetter(Schema):
    """A record of an agent's batch the cloud refused, kept for an operator."""

    seq: int = Field(description="The record's sequence number on the agent")
    kind: str
    key: str
    reason: str
    data: dict[str, Any]
    received_at: Timestamp


class DeadLetterList(Schema):
    """GET /api/v1/agents/{agent_id}/dead-letters: newest first (admins only)."""

    dead_letters: list[DeadLetter]
    total: int
    limit: int
    offset: int
