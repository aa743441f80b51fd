"""The identity delta for an agent (system path): who may use its farms, their permissions and
their sessions (docs/design.md section 8)."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "agent_api_keys",
    "agent_permissions",
    "agent_sessions",
    "agent_users",
    "identity_version",
]

# Users with access to the agent's farms: admins (every farm), the agent's owner, the farms'
# creators and permission holders. Suspended users are included, so the agent learns it.
_USERS = """
    WITH mine AS (SELECT id, user_id FROM farms WHERE agent_id = $1)
    SELECT u.id, u.email, u.role, u.plan, u.status, u.password_hash, u.mfa_enabled
    FROM users AS u
    WHERE u.role = 'admin'
       OR u.id = (SELECT a.owner_id FROM agents AS a WHERE a.id = $1)
       OR u.id IN (SELECT user_id FROM mine)
       OR u.id IN (SELECT p.user_id FROM permissions AS p WHERE p.farm_id IN (SELECT id FROM mine))
    ORDER BY u.id
"""


async def agent_users(conn: Connection, agent_id: UUID) -> list[asyncpg.Record]:
    """Users with access to the agent's farms."""
    return list(await conn.fetch(_USERS, agent_id))


async def agent_permissions(conn: Connection, agent_id: UUID) -> list[asyncpg.Record]:
    """Permissions on the agent's farms."""
    return list(
        await conn.fetch(
            "SELECT p.id, p.user_id, p.farm_id, p.permission_type FROM permissions AS p"
            " JOIN farms AS f ON f.id = p.farm_id WHERE f.agent_id = $1 ORDER BY p.id",
            agent_id,
        )
    )


async def agent_sessions(
    conn: Connection, user_ids: list[UUID], revoked_within_s: int
) -> list[asyncpg.Record]:
    """Unexpired sessions of ``user_ids``, revoked ones included (for ``revoked_within_s``)."""
    return list(
        await conn.fetch(
            "SELECT id, user_id, created_at, expires_at, revoked_at FROM sessions"
            " WHERE user_id = ANY($1::uuid[]) AND expires_at > now()"
            " AND (revoked_at IS NULL OR revoked_at > now() - make_interval(secs => $2))"
            " ORDER BY id",
            user_ids,
            revoked_within_s,
        )
    )


async def agent_api_keys(conn: Connection, user_ids: list[UUID]) -> list[asyncpg.Record]:
    """Unexpired API keys of ``user_ids``, revoked ones included (the agent drops them)."""
    return list(
        await conn.fetch(
            "SELECT id, user_id, name, prefix, key_hash, created_at, expires_at, revoked_at"
            " FROM api_keys WHERE user_id = ANY($1::uuid[])"
            " AND (expires_at IS NULL OR expires_at > now()) ORDER BY id",
            user_ids,
        )
    )


async def identity_version(conn: Connection) -> int:
    """The cloud's identity version (migration 0020): grows with every committed change."""
    version: int = await conn.fetchval("SELECT version FROM identity_clock WHERE id = 1")
    return version
