"""API keys: created and revoked by admins for a user, shown once, stored as a hash
(DESIGN.md section 4). A key acts with its user's role, plan and permissions."""

from __future__ import annotations

import sqlite3

from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.authority import IdentityAuthority
from agent.store.api_keys import ApiKeyStore
from agent.store.users import UserStore
from protocol.access import require_role
from protocol.errors import NotFound
from protocol.identity import Principal, Role
from protocol.schemas.auth import ApiKey, ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyListQuery
from protocol.tokens import hash_secret, new_secret
from protocol.user_rules import API_KEY_PREFIX, api_key_display_prefix

__all__ = ["ApiKeyService"]


def _key_model(row: sqlite3.Row) -> ApiKey:
    return ApiKey(**{name: row[name] for name in ApiKey.model_fields})


class ApiKeyService:
    """Admin management of API keys."""

    def __init__(
        self, keys: ApiKeyStore, users: UserStore, events: AuthEvents, authority: IdentityAuthority
    ) -> None:
        self._authority = authority
        self._keys = keys
        self._users = users
        self._events = events

    async def create(
        self, principal: Principal, body: ApiKeyCreate, address: str | None
    ) -> ApiKeyCreated:
        """A new key for a user; the key is in this answer and nowhere else."""
        require_role(principal, Role.ADMIN)
        user = await self._users.by_id(body.user_id)
        if user is None:
            raise NotFound("User not found")
        self._authority.refuse_for(user, "create an API key")
        key = new_secret(API_KEY_PREFIX)
        prefix = api_key_display_prefix(key)
        row = await self._keys.create(
            user["id"], body.name, prefix, hash_secret(key), principal.user_id
        )
        await self._events.record(
            "api_key_created",
            user_id=user["id"],
            email=user["email"],
            address=address,
            key_id=row["id"],
            by=principal.user_id,
        )
        return ApiKeyCreated(**_key_model(row).model_dump(), key=key)

    async def list(self, principal: Principal, query: ApiKeyListQuery) -> ApiKeyList:
        """Keys, newest first, without the secrets (admins only)."""
        require_role(principal, Role.ADMIN)
        rows, total = await self._keys.list(
            query.user_id, query.include_revoked, query.limit, query.offset
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
        row = await self._keys.get(key_id)
        if row is None:
            raise NotFound("API key not found")
        self._authority.refuse_for(await self._users.by_id(row["user_id"]), "revoke an API key")
        if await self._keys.revoke(key_id):
            await self._events.record(
                "api_key_revoked",
                user_id=row["user_id"],
                address=address,
                key_id=key_id,
                by=principal.user_id,
            )
