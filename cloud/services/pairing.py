"""Pairing (docs/design.md section 8): an admin creates an agent and gets a one-time code; the agent
redeems the code with its Ed25519 public key."""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from datetime import timedelta
from uuid import UUID

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cloud.store import sync_agents, sync_mirror
from cloud.store.db import Database
from protocol.errors import Forbidden, NotFound, ValidationFailed
from protocol.identity import Principal
from protocol.jwk import public_jwk
from protocol.schemas.agents import (
    Agent,
    AgentCreate,
    AgentCreated,
    AgentList,
    AgentListQuery,
    DeadLetter,
    DeadLetterList,
    PairRequest,
    PairResult,
    SealingKey,
)
from protocol.schemas.common import PageQuery
from protocol.timefmt import iso

__all__ = ["PairingService", "code_hash"]

log = logging.getLogger(__name__)


def code_hash(code: str) -> bytes:
    """The stored form of a pairing code (codes carry 160 bits, so a fast hash suffices)."""
    return hashlib.sha256(code.strip().encode()).digest()


class PairingService:
    """Creates agents, pairs them, lists and revokes them."""

    def __init__(
        self,
        db: Database,
        issuer: str,
        cloud_key: Ed25519PublicKey,
        code_ttl_s: int,
        sealing: SealingKey,
    ) -> None:
        self._db = db
        self._sealing = sealing
        self._issuer = issuer
        self._cloud_key_x = public_jwk(cloud_key)["x"]
        self._ttl = timedelta(seconds=code_ttl_s)

    async def create(self, principal: Principal, body: AgentCreate) -> AgentCreated:
        """A new agent and its pairing code, shown once (admins only)."""
        if not principal.is_admin:
            raise Forbidden("Only an administrator may create agents")
        code = base64.b32encode(secrets.token_bytes(20)).decode().rstrip("=")
        owner = UUID(body.owner_id) if body.owner_id else UUID(principal.user_id)
        try:
            async with self._db.as_user(UUID(principal.user_id)) as conn:
                row = await sync_agents.create_agent(
                    conn, body.name, owner, code_hash(code), self._ttl
                )
        except asyncpg.ForeignKeyViolationError:
            raise ValidationFailed.of([("owner_id", "no such user")]) from None
        log.info("agent %s created by %s", row["id"], principal.user_id)
        return AgentCreated(
            id=str(row["id"]),
            name=row["name"],
            owner_id=str(row["owner_id"]),
            pairing_code=code,
            pairing_expires_at=iso(row["pairing_expires_at"]),
        )

    async def pair(self, body: PairRequest) -> PairResult:
        """Register the agent's key against a live code; 404 for an unknown or used code."""
        try:
            raw = base64.urlsafe_b64decode(body.public_key + "=" * (-len(body.public_key) % 4))
            Ed25519PublicKey.from_public_bytes(raw)
        except ValueError:
            raise ValidationFailed.of([("public_key", "not a raw Ed25519 key")]) from None
        async with self._db.as_system() as conn:
            agent_id = await sync_agents.redeem_pairing(conn, code_hash(body.code), raw)
        if agent_id is None:
            raise NotFound("Unknown, used or expired pairing code")
        log.info("agent %s paired", agent_id)
        return PairResult(
            agent_id=str(agent_id), cloud_issuer=self._issuer, cloud_public_key=self._cloud_key_x
        )

    def sealing_key(self) -> SealingKey:
        """The cloud's signed sealing key (contact point URLs are sealed to it)."""
        return self._sealing

    async def list(self, principal: Principal, query: AgentListQuery) -> AgentList:
        """Agents newest first: every one for admins, their own for owners (row-level security)."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await sync_agents.list_agents(
                conn, query.revoked, query.limit, query.offset
            )
        return AgentList(
            agents=[_agent(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def dead_letters(
        self, principal: Principal, agent_id: str, query: PageQuery
    ) -> DeadLetterList:
        """The records of an agent's batches the cloud refused, newest first (admins only)."""
        if not principal.is_admin:
            raise Forbidden("Only an administrator may read an agent's dead letters")
        async with self._db.as_system() as conn:
            if not await sync_agents.agent_exists(conn, UUID(agent_id)):
                raise NotFound("Agent not found")
            rows, total = await sync_mirror.dead_letters(
                conn, UUID(agent_id), query.limit, query.offset
            )
        letters = [
            DeadLetter(seq=r["seq"], kind=r["kind"], key=r["key"], reason=r["reason"],
                       data=r["data"], received_at=iso(r["received_at"]))
            for r in rows
        ]  # fmt: skip
        return DeadLetterList(
            dead_letters=letters, total=total, limit=query.limit, offset=query.offset
        )

    async def revoke(self, principal: Principal, agent_id: str) -> None:
        """Refuse the agent's batches from now on (admins only); 404 for an unknown agent."""
        if not principal.is_admin:
            raise Forbidden("Only an administrator may revoke agents")
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if not await sync_agents.revoke_agent(conn, UUID(agent_id)):
                raise NotFound("Agent not found")
        log.warning("agent %s revoked by %s", agent_id, principal.user_id)


def _agent(row: asyncpg.Record) -> Agent:
    def stamp(name: str) -> str | None:
        value = row[name]
        return None if value is None else iso(value)

    return Agent(
        id=str(row["id"]),
        name=row["name"],
        owner_id=None if row["owner_id"] is None else str(row["owner_id"]),
        paired=row["paired_at"] is not None,
        paired_at=stamp("paired_at"),
        pairing_expires_at=stamp("pairing_expires_at"),
        last_seen_at=stamp("last_seen_at"),
        acked_seq=row["acked_seq"],
        refused_records=row["refused_records"],
        revoked_at=stamp("revoked_at"),
        created_at=iso(row["created_at"]),
    )
