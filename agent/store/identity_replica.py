"""The replica of the cloud's identity (docs/design.md section 8): users with origin 'cloud', their
permissions on this agent's farms, their sessions and API keys, so they log in on the LAN offline
and the cloud's tokens, keys and revocations hold here too. The replica flows one way: nothing
written here goes into the outbox (protocol/sync_kinds.py)."""

from __future__ import annotations

import logging

import aiosqlite

from agent.store.db import Database
from protocol.sync import IdentityDelta, ReplicaUser
from protocol.timefmt import now_iso

__all__ = ["IdentityReplicaStore"]

log = logging.getLogger(__name__)

# A cloud user without a password (invited, not yet set) cannot log in here: no hash matches.
_NO_PASSWORD = "!"


class IdentityReplicaStore:
    """Writes a delta into users, permissions and sessions in one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def version(self) -> int:
        """The cloud's identity version the replica holds (0 before the first delta)."""
        row = await self._db.fetch_one("SELECT version FROM identity_replica_state WHERE id = 1")
        return int(row["version"]) if row is not None else 0

    async def apply(self, delta: IdentityDelta) -> bool:
        """Make the replica match ``delta``; cloud users missing from it become inactive.

        ``False`` (and nothing written) when the delta is not newer than the version held:
        an answer that was slow on the way can never roll a revocation back. A delta of a cloud
        that sends no version (0) always applies.

        These writes touch only tables without outbox triggers (migration 0025): the replica
        is never sent back to the cloud.
        """
        now = now_iso()
        async with self._db.transaction() as conn:
            cursor = await conn.execute("SELECT version FROM identity_replica_state WHERE id = 1")
            (held,) = await cursor.fetchone() or (0,)
            await cursor.close()
            if delta.version and delta.version <= held:
                log.debug("identity delta %d ignored: %d held", delta.version, held)
                return False
            await conn.execute(
                "UPDATE identity_replica_state SET version = ? WHERE id = 1",
                (max(held, delta.version),),
            )
            kept: list[str] = []
            for user in delta.users:
                cursor = await conn.execute(
                    "SELECT id, origin FROM users WHERE email = ? AND id != ?",
                    (user.email, user.id),
                )
                clash = await cursor.fetchone()
                await cursor.close()
                if clash is not None:
                    # A local account holds the e-mail: it stays the one that logs in here.
                    log.warning(
                        "cloud user %s not replicated: e-mail held by a local user", user.id
                    )
                    continue
                kept.append(user.id)
                await conn.execute(
                    "INSERT INTO users (id, email, password_hash, role, status, plan, origin,"
                    " email_verified, created_at, updated_at)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'cloud', 1, ?7, ?7)"
                    " ON CONFLICT (id) DO UPDATE SET email = excluded.email,"
                    " password_hash = excluded.password_hash, role = excluded.role,"
                    " status = excluded.status, plan = excluded.plan, origin = 'cloud',"
                    " updated_at = excluded.updated_at"
                    " WHERE (email, password_hash, role, status, plan, origin)"
                    " IS NOT (excluded.email, excluded.password_hash, excluded.role,"
                    " excluded.status, excluded.plan, 'cloud')",
                    (user.id, user.email, _replica_hash(user), user.role, user.status,
                     user.plan, now),
                )  # fmt: skip
            marks = ",".join("?" * len(kept))
            await conn.execute(
                f"UPDATE users SET status = 'inactive', updated_at = ? WHERE origin = 'cloud'"
                f" AND status != 'inactive' AND id NOT IN ({marks})",
                (now, *kept),
            )
            wanted = {(p.user_id, p.farm_id) for p in delta.permissions if p.user_id in kept}
            for perm in delta.permissions:
                if (perm.user_id, perm.farm_id) not in wanted:
                    continue
                # Only on farms this agent holds; the WHERE keeps an unchanged row untouched, so
                # no outbox record echoes it back.
                await conn.execute(
                    "INSERT INTO permissions (id, user_id, farm_id, permission_type, granted_at)"
                    " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM farms WHERE id = ?3)"
                    " ON CONFLICT (user_id, farm_id) DO UPDATE SET"
                    " permission_type = excluded.permission_type"
                    " WHERE permission_type != excluded.permission_type",
                    (perm.id, perm.user_id, perm.farm_id, perm.permission_type, now),
                )
            cursor = await conn.execute(
                "SELECT p.id, p.user_id, p.farm_id FROM permissions AS p"
                " JOIN users AS u ON u.id = p.user_id WHERE u.origin = 'cloud'"
            )
            stale = [(r[0],) for r in await cursor.fetchall() if (r[1], r[2]) not in wanted]
            await cursor.close()
            await conn.executemany("DELETE FROM permissions WHERE id = ?", stale)
            await _apply_sessions(conn, delta, kept, now)
            await _apply_api_keys(conn, delta, kept, now)
        return True


async def _apply_sessions(
    conn: aiosqlite.Connection, delta: IdentityDelta, kept: list[str], now: str
) -> None:
    """Cloud sessions as listed; a revocation here is never undone. A cloud session the cloud
    no longer lists (revoked longer ago than its window, or deleted) is revoked here too."""
    listed = []
    for session in delta.sessions:
        if session.user_id not in kept:
            continue
        listed.append(session.id)
        await conn.execute(
            "INSERT INTO sessions (id, user_id, created_at, expires_at, revoked_at,"
            " revoke_reason, origin) VALUES (?, ?, ?, ?, ?, ?, 'cloud')"
            " ON CONFLICT (id) DO UPDATE SET"
            " revoked_at = coalesce(sessions.revoked_at, excluded.revoked_at),"
            " revoke_reason = coalesce(sessions.revoke_reason, excluded.revoke_reason)",
            (session.id, session.user_id, session.created_at, session.expires_at,
             session.revoked_at, "revoked in the cloud" if session.revoked_at else None),
        )  # fmt: skip
    # Only for users the delta lists: one who dropped out (no grant left) is inactive here
    # anyway, and keeps their sessions if a grant brings them back.
    await conn.execute(
        f"UPDATE sessions SET revoked_at = ?, revoke_reason = 'no longer in the cloud'"
        f" WHERE origin = 'cloud' AND revoked_at IS NULL AND id NOT IN ({_marks(listed)})"
        f" AND user_id IN ({_marks(kept)})",
        (now, *listed, *kept),
    )


async def _apply_api_keys(
    conn: aiosqlite.Connection, delta: IdentityDelta, kept: list[str], now: str
) -> None:
    """Cloud API keys as listed (stored as the same hash the agent checks); a key the cloud
    revoked, let expire or deleted is refused here from this moment."""
    listed = []
    for key in delta.api_keys:
        if key.user_id not in kept:
            continue
        listed.append(key.id)
        await conn.execute(
            "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, created_at, expires_at,"
            " revoked_at, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'cloud')"
            " ON CONFLICT (id) DO UPDATE SET name = excluded.name,"
            " expires_at = excluded.expires_at,"
            " revoked_at = coalesce(api_keys.revoked_at, excluded.revoked_at)",
            (key.id, key.user_id, key.name, key.prefix, key.key_hash, key.created_at,
             key.expires_at, key.revoked_at),
        )  # fmt: skip
    await conn.execute(
        f"UPDATE api_keys SET revoked_at = ?"
        f" WHERE origin = 'cloud' AND revoked_at IS NULL AND id NOT IN ({_marks(listed)})"
        f" AND user_id IN ({_marks(kept)})",
        (now, *listed, *kept),
    )


def _replica_hash(user: ReplicaUser) -> str:
    """The hash the agent checks a password against. A user with MFA in the cloud gets none:
    the agent has no second factor for them, so a password alone must not open a session."""
    if user.mfa_enabled or user.password_hash is None:
        return _NO_PASSWORD
    return user.password_hash


def _marks(values: list[str]) -> str:
    """Placeholders for an ``IN`` list."""
    return ",".join("?" * len(values))
