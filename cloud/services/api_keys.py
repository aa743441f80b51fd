"""API keys on the cloud: created and revoked by admins for a user, shown once, stored as a hash
(DESIGN.md section 4); ``X-API-Key`` authenticates as the key's user, with their role and plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg

from cloud.services.sessions import AuthEventRecorder
from cloud.store import api_keys as store
from cloud.store import users as users_store
from cloud.store.db import Database
from protocol.access import require_role
from protocol.errors import NotFound, Unauthorized
from protocol.identity import Plan, Principal, Role
from protocol.schemas.auth import ApiKey, ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyListQuery
from protocol.timefmt import iso
from protocol.tokens import hash_secret, new_secret
from protocol.user_rules import API_KEY_PREFIX, api_key_display_prefix

__all__ = ["API_KEY_HEADER", "ApiKeyService"]

API_KEY_HEADER = "X-API-Key"

# last_used_at is stamped at most this often per key: a write per request would cost more than
# the column is worth.
_TOUCH_INTERVAL = timedelta(minutes=1)


def _key_hash(key: str) -> bytes:
    """The stored (bytea) form of a key."""
    return bytes.fromhex(hash_secret(key))


def _key_model(row: asyncpg.Record) -> ApiKey:
    return ApiKey(
        id=str(row["id"]),
        user_id=str(row["user_id"]),
        name=row["name"],
        prefix=row["prefix"],
        created_by=str(row["created_by"]) if row["created_by"] is not None else None,
        created_at=iso(row["created_at"]),
        last_used_at=iso(row["last_used_at"]) if row["last_used_at"] else None,
        revoked_at=iso(row["revoked_at"]) if row["revoked_at"] else None,
    )


class ApiKeyService:
    """Admin management of API keys, and authentication by key."""

    def __init__(self, db: Database, events: AuthEventRecorder) -> None:
        self._db = db
        self._events = events

    async def create(
        self, principal: Principal, body: ApiKeyCreate, address: str | None
    ) -> ApiKeyCreated:
        """A new key for a user; the key is in this answer and nowhere else (admins only)."""
        require_role(principal, Role.ADMIN)
        key = new_secret(API_KEY_PREFIX)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            user = await users_store.get_user(conn, UUID(body.user_id))
            if user is None:
                raise NotFound("User not found")
            row = await store.create_key(
                conn,
                user["id"],
                body.name,
                api_key_display_prefix(key),
                _key_hash(key),
                UUID(principal.user_id),
            )
        await self._events.record(
            "api_key_created",
            user_id=user["id"],
            email=user["email"],
            address=address,
            key_id=str(row["id"]),
            by=principal.user_id,
        )
        return ApiKeyCreated(**_key_model(row).model_dump(), key=key)

    async def list(self, principal: Principal, query: ApiKeyListQuery) -> ApiKeyList:
        """Keys, newest first, without the secrets (admins only)."""
        require_role(principal, Role.ADMIN)
        user_id = UUID(query.user_id) if query.user_id else None
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await store.list_keys(
                conn, user_id, query.include_revoked, query.limit, query.offset
            )
        return ApiKeyList(
            api_keys=[_key_model(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def revoke(self, principal: Principal, key_id: str, address: str | None) -> None:
        """Revoke a key: refused from the next request on (admins only)."""
        require_role(principal, Role.ADMIN)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await store.get_key(conn, UUID(key_id))
            if row is None:
                raise NotFound("API key not found")
            revoked = await store.revoke_key(conn, row["id"])
        if revoked:
            await self._events.record(
                "api_key_revoked",
                user_id=row["user_id"],
                address=address,
                key_id=key_id,
                by=principal.user_id,
            )

    async def principal_from_api_key(self, raw: str) -> Principal:
        """The user a key acts as; 401 if the key is unknown, revoked or expired, or its user
        is not active.

        System path: the caller is only known once the key is (docs/cloud-rls.md).
        """
        async with self._db.as_system() as conn:
            row = await store.caller(conn, _key_hash(raw.strip()))
            if row is None:
                raise Unauthorized("Invalid API key")
            if row["status"] != "active":
                raise Unauthorized("Account is not active")
            stale_before = datetime.now(UTC) - _TOUCH_INTERVAL
            if row["last_used_at"] is None or row["last_used_at"] < stale_before:
                await store.touch_key(conn, row["key_id"], stale_before)
        return Principal(
            user_id=str(row["id"]),
            email=row["email"],
            role=Role(row["role"]),
            plan=Plan(row["plan"]),
            api_key_id=str(row["key_id"]),
        )
