"""The identity delta an agent receives with every ack (DESIGN.md section 8)."""

from __future__ import annotations

from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cloud.store import sync_identity
from cloud.store.db import Database
from protocol.jwk import public_jwk
from protocol.sync import IdentityDelta, ReplicaPermission, ReplicaSession, ReplicaUser
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
        async with self._db.as_system() as conn:
            users = await sync_identity.agent_users(conn, agent_id)
            permissions = await sync_identity.agent_permissions(conn, agent_id)
            sessions = await sync_identity.agent_sessions(
                conn, [u["id"] for u in users], self._revoked_within_s
            )
        return IdentityDelta(
            issuer=self._issuer,
            public_key=self._key_x,
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
        )
