"""The identity delta an agent receives with an ack (docs/design.md section 8).

The delta is read in one snapshot together with the cloud's identity version, so the version
names exactly the state the delta shows; an agent that already holds that version gets none.
"""

from __future__ import annotations

from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cloud.store import sync_identity
from cloud.store.db import Database
from protocol.jwk import public_jwk
from protocol.sync import (
    IdentityDelta,
    ReplicaApiKey,
    ReplicaPermission,
    ReplicaSession,
    ReplicaUser,
)
from protocol.timefmt import iso

__all__ = ["IdentityDeltaSource"]


class IdentityDeltaSource:
    """Reads, on the system path, who may use an agent's farms, and names the cloud's key."""

    def __init__(
        self, db: Database, issuer: str, public_key: Ed25519PublicKey, revoked_within_s: int
    ) -> None:
        self._db = db
        self._issuer = issuer
        self._key_x = public_jwk(public_key)["x"]
        self._revoked_within_s = revoked_within_s

    async def for_agent(self, agent_id: UUID) -> IdentityDelta:
        """The full current delta (small: the users of one farm site)."""
        delta = await self.newer_than(agent_id, 0)
        assert delta is not None, "identity versions start at 1"
        return delta

    async def newer_than(self, agent_id: UUID, held_version: int) -> IdentityDelta | None:
        """The current delta, or ``None`` when the agent already holds this version."""
        async with self._db.snapshot_as_system() as conn:
            version = await sync_identity.identity_version(conn)
            if held_version >= version:
                return None
            users = await sync_identity.agent_users(conn, agent_id)
            user_ids = [u["id"] for u in users]
            permissions = await sync_identity.agent_permissions(conn, agent_id)
            sessions = await sync_identity.agent_sessions(conn, user_ids, self._revoked_within_s)
            keys = await sync_identity.agent_api_keys(conn, user_ids)
        return IdentityDelta(
            issuer=self._issuer,
            public_key=self._key_x,
            version=version,
            users=tuple(
                ReplicaUser(
                    id=str(u["id"]),
                    email=u["email"],
                    role=u["role"],
                    plan=u["plan"],
                    status=u["status"],
                    password_hash=u["password_hash"],
                    mfa_enabled=u["mfa_enabled"],
                )
                for u in users
            ),
            permissions=tuple(
                ReplicaPermission(
                    id=str(p["id"]),
                    user_id=str(p["user_id"]),
                    farm_id=str(p["farm_id"]),
                    permission_type=p["permission_type"],
                )
                for p in permissions
            ),
            sessions=tuple(
                ReplicaSession(
                    id=str(s["id"]),
                    user_id=str(s["user_id"]),
                    created_at=iso(s["created_at"]),
                    expires_at=iso(s["expires_at"]),
                    revoked_at=iso(s["revoked_at"]) if s["revoked_at"] else None,
                )
                for s in sessions
            ),
            api_keys=tuple(
                ReplicaApiKey(
                    id=str(k["id"]),
                    user_id=str(k["user_id"]),
                    name=k["name"],
                    prefix=k["prefix"],
                    key_hash=bytes(k["key_hash"]).hex(),
                    created_at=iso(k["created_at"]),
                    expires_at=iso(k["expires_at"]) if k["expires_at"] else None,
                    revoked_at=iso(k["revoked_at"]) if k["revoked_at"] else None,
                )
                for k in keys
            ),
        )
