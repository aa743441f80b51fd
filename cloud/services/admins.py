"""Admin accounts made by the operator: the first admin on an empty database, and more later
(``farm-cloud create-admin``). docs/design.md section 10: the cloud starts like the agent."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from cloud.store import identity as store
from cloud.store.db import Database
from farmkit.passwords import new_password_hash
from protocol.errors import Conflict

__all__ = ["AdminAccounts", "NewAdmin"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewAdmin:
    """An admin just created; ``generated_password`` is set only if the password was generated
    (it is shown once and stored nowhere but as a hash)."""

    email: str
    generated_password: str | None


class AdminAccounts:
    """Creates admin accounts on the system path, outside any user's request."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def ensure_first_admin(self, email: str, password: str | None) -> NewAdmin | None:
        """Create the first admin if the database has no user; ``None`` when users exist."""
        return await self._create(email, password, only_if_empty=True)

    async def create_admin(self, email: str, password: str | None) -> NewAdmin:
        """Create one more admin; :class:`Conflict` if the address is taken."""
        created = await self._create(email, password, only_if_empty=False)
        assert created is not None  # only_if_empty=False either creates or raises
        return created

    async def _create(
        self, email: str, password: str | None, *, only_if_empty: bool
    ) -> NewAdmin | None:
        address = email.strip().lower()
        if "@" not in address:
            raise ValueError(f"not an e-mail address: {email!r}")
        generated = None if password else secrets.token_urlsafe(12)
        password_hash = await new_password_hash(password or generated or "")
        async with self._db.as_system() as conn:
            await store.lock_admin_creation(conn)
            if only_if_empty and await store.count_users(conn) > 0:
                return None
            if await store.create_admin(conn, address, password_hash) is None:
                raise Conflict(f"A user with the address {address} already exists")
        log.info("created admin %s", address)
        return NewAdmin(email=address, generated_password=generated)
