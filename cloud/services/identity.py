"""Identity on the cloud: resolving a request's caller from its access token (docs/design.md
section 4).

The cloud is the identity authority: it accepts only its own access tokens. A token is checked
twice: its signature and expiry offline, then its session in the database (a revoked session is
refused at once, not at expiry). The session lookup runs on the user path for the user the token
names, so an account suspended since finds nothing.
"""

from __future__ import annotations

import logging
from uuid import UUID

from cloud.store import identity as store
from cloud.store.db import Database
from protocol.errors import TokenExpired, Unauthorized
from protocol.identity import Plan, Principal, Role
from protocol.tokens import InvalidToken, TokenExpiredError, TokenVerifier

__all__ = ["IdentityService"]

log = logging.getLogger(__name__)


class IdentityService:
    """Tells who is calling (logging in is protocol/identity_flows/login.py)."""

    def __init__(self, db: Database, verifier: TokenVerifier) -> None:
        self._db = db
        self._verifier = verifier

    async def principal_from_token(self, token: str) -> Principal:
        """Verify an access token and its session; 401 if expired, revoked or invalid."""
        try:
            claims = self._verifier.verify(token)
            user_id = UUID(claims.user_id)
            session_id = UUID(claims.session_id)
        except TokenExpiredError:
            raise TokenExpired() from None
        except (InvalidToken, ValueError):
            raise Unauthorized("Invalid access token") from None
        async with self._db.as_user(user_id) as conn:
            row = await store.caller(conn, session_id)
        if row is None or row["id"] != user_id:
            raise Unauthorized("Unknown session")
        if row["revoked_at"] is not None:
            raise Unauthorized("Session has been revoked")
        if not row["current"]:
            raise Unauthorized("Session has expired")
        return Principal(
            user_id=str(user_id),
            email=row["email"],
            role=Role(row["role"]),
            plan=Plan(row["plan"]),
            session_id=str(session_id),
        )
