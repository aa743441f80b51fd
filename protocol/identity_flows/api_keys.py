"""API keys: created and revoked by admins for a user, shown once, stored as a hash
(docs/design.md section 4). A key acts with its user's role, plan and permissions.

Written once for agent and cloud; the store is the part that differs (on the cloud it reads and
writes as the calling admin, under row-level security). On a paired agent, a cloud user's keys
are the cloud's (the authority refuses them).
"""

from __future__ import annotations

from typing import Generic, Protocol

from protocol.access import require_role
from protocol.errors import NotFound
from protocol.identity import Principal, Role
from protocol.identity_flows.ports import AuthEventLog, IdentityAuthority, U
from protocol.schemas.auth import ApiKey, ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyListQuery
from protocol.tokens import hash_secret, new_secret
from protocol.user_rules import API_KEY_PREFIX, api_key_display_prefix

__all__ = ["ApiKeyFlows", "ApiKeyStore"]


class ApiKeyStore(Protocol[U]):
    """Users and their keys, as the calling admin may see them."""

    async def user(self, caller: Principal, user_id: str) -> U | None:
        """A user by id."""
        ...

    async def create_key(
        self, caller: Principal, user: U, name: str, prefix: str, key_hash: str
    ) -> ApiKey:
        """Store a new key of ``user``, made by ``caller``."""
        ...

    async def key(self, caller: Principal, key_id: str) -> ApiKey | None:
        """A key by id."""
        ...

    async def list_keys(
        self,
        caller: Principal,
        user_id: str | None,
        include_revoked: bool,
        limit: int,
        offset: int,
    ) -> tuple[list[ApiKey], int]:
        """Keys newest first, and the total before paging."""
        ...

    async def revoke_key(self, caller: Principal, key_id: str) -> bool:
        """Revoke a key; ``False`` if it was revoked already."""
        ...


class ApiKeyFlows(Generic[U]):
    """Admin management of API keys."""

    def __init__(
        self, store: ApiKeyStore[U], events: AuthEventLog, authority: IdentityAuthority[U]
    ) -> None:
        self._store = store
        self._events = events
        self._authority = authority

    async def create(
        self, principal: Principal, body: ApiKeyCreate, address: str | None
    ) -> ApiKeyCreated:
        """A new key for a user; the key is in this answer and nowhere else (admins only)."""
        require_role(principal, Role.ADMIN)
        user = await self._store.user(principal, body.user_id)
        if user is None:
            raise NotFound("User not found")
        self._authority.refuse_for(user, "create an API key")
        key = new_secret(API_KEY_PREFIX)
        created = await self._store.create_key(
            principal, user, body.name, api_key_display_prefix(key), hash_secret(key)
        )
        await self._events.record(
            "api_key_created",
            user_id=user["id"],
            email=user["email"],
            address=address,
            key_id=created.id,
            by=principal.user_id,
        )
        return ApiKeyCreated(**created.model_dump(), key=key)

    async def list(self, principal: Principal, query: ApiKeyListQuery) -> ApiKeyList:
        """Keys, newest first, without the secrets (admins only)."""
        require_role(principal, Role.ADMIN)
        keys, total = await self._store.list_keys(
            principal, query.user_id, query.include_revoked, query.limit, query.offset
        )
        return ApiKeyList(api_keys=keys, total=total, limit=query.limit, offset=query.offset)

    async def revoke(self, principal: Principal, key_id: str, address: str | None) -> None:
        """Revoke a key: refused from the next request on (admins only)."""
        require_role(principal, Role.ADMIN)
        key = await self._store.key(principal, key_id)
        if key is None:
            raise NotFound("API key not found")
        self._authority.refuse_for(
            await self._store.user(principal, key.user_id), "revoke an API key"
        )
        if await self._store.revoke_key(principal, key_id):
            await self._events.record(
                "api_key_revoked",
                user_id=key.user_id,
                address=address,
                key_id=key_id,
                by=principal.user_id,
            )
