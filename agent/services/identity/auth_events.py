"""Authentication events: recorded by the identity services, listed by admins."""

from __future__ import annotations

import json
import logging
from typing import Any

from agent.store.auth_events import AuthEventStore
from protocol.access import require_role
from protocol.identity import Principal, Role
from protocol.schemas.auth import AuthEvent, AuthEventList, AuthEventQuery
from protocol.timefmt import iso

__all__ = ["AuthEvents"]

log = logging.getLogger(__name__)


class AuthEvents:
    """Records what happened to whom, from where; lets admins read it."""

    def __init__(self, store: AuthEventStore) -> None:
        self._store = store

    async def record(
        self,
        kind: str,
        *,
        user_id: str | None = None,
        email: str | None = None,
        address: str | None = None,
        **detail: Any,
    ) -> None:
        """Append an event; secrets never go in ``detail``."""
        log.info("auth event %s user=%s email=%s address=%s", kind, user_id, email, address)
        await self._store.record(kind, user_id=user_id, email=email, address=address, detail=detail)

    async def list(self, principal: Principal, query: AuthEventQuery) -> AuthEventList:
        """Events newest first (admins only)."""
        require_role(principal, Role.ADMIN)
        since = iso(query.since) if query.since is not None else None
        rows, total = await self._store.list(
            query.user_id, query.kind, since, query.limit, query.offset
        )
        events = [
            AuthEvent(
                id=row["id"],
                kind=row["kind"],
                user_id=row["user_id"],
                email=row["email"],
                address=row["address"],
                detail=json.loads(row["detail"]),
                created_at=row["created_at"],
            )
            for row in rows
        ]
        return AuthEventList(
            auth_events=events, total=total, limit=query.limit, offset=query.offset
        )
