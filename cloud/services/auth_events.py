"""Authentication events on the cloud: recorded by the identity services, listed by admins."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from cloud.store import auth_events as store
from cloud.store.db import Database
from protocol.access import require_role
from protocol.identity import Principal, Role
from protocol.schemas.auth import AuthEvent, AuthEventList, AuthEventQuery
from protocol.timefmt import iso

__all__ = ["AuthEvents"]

log = logging.getLogger(__name__)


def _uuid(value: UUID | str | None) -> UUID | None:
    return value if value is None or isinstance(value, UUID) else UUID(value)


class AuthEvents:
    """Records what happened to whom, from where; lets admins read it."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self,
        kind: str,
        *,
        user_id: UUID | str | None = None,
        email: str | None = None,
        address: str | None = None,
        **detail: Any,
    ) -> None:
        """Append an event; secrets never go in ``detail``.

        System path: many events (a failed login, a refused refresh) have no caller yet.
        A ``session_id`` in ``detail`` goes to its own column.
        """
        log.info("auth event %s user=%s email=%s address=%s", kind, user_id, email, address)
        session_id = detail.pop("session_id", None)
        async with self._db.as_system() as conn:
            await store.insert_event(
                conn,
                kind,
                user_id=_uuid(user_id),
                email=email,
                session_id=_uuid(str(session_id)) if session_id else None,
                ip=address,
                details=detail,
            )

    async def list(self, principal: Principal, query: AuthEventQuery) -> AuthEventList:
        """Events newest first (admins only; row-level security confines the rest)."""
        require_role(principal, Role.ADMIN)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await store.list_events(
                conn,
                user_id=_uuid(query.user_id),
                kind=query.kind,
                since=query.since,
                limit=query.limit,
                offset=query.offset,
            )
        events = [
            AuthEvent(
                id=str(row["id"]),
                kind=row["event_type"],
                user_id=str(row["user_id"]) if row["user_id"] is not None else None,
                email=row["email"],
                address=row["address"],
                detail=row["details"],
                created_at=iso(row["created_at"]),
            )
            for row in rows
        ]
        return AuthEventList(
            auth_events=events, total=total, limit=query.limit, offset=query.offset
        )
