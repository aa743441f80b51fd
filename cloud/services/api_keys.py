"""``X-API-Key`` on the cloud: a key authenticates as its user, with their role and plan
(docs/design.md section 4). Admins create and revoke keys through the shared flows
(protocol/identity_flows/api_keys.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cloud.store import api_keys as store
from cloud.store.db import Database
from protocol.errors import Unauthorized
from protocol.identity import Plan, Principal, Role
from protocol.tokens import hash_secret

__all__ = ["API_KEY_HEADER", "ApiKeyAuthenticator"]

API_KEY_HEADER = "X-API-Key"

# last_used_at is stamped at most this often per key: a write per request would cost more than
# the column is worth.
_TOUCH_INTERVAL = timedelta(minutes=1)


def _key_hash(key: str) -> bytes:
    """The stored (bytea) form of a key."""
    return bytes.fromhex(hash_secret(key))


class ApiKeyAuthenticator:
    """Authentication by API key (managing keys is protocol/identity_flows/api_keys.py's)."""

    def __init__(self, db: Database) -> None:
        self._db = db

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
