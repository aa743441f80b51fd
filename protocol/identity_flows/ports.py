"""What the shared identity flows (protocol/identity_flows) need from the side they run on.

The flows (account_flows.py, mfa.py, api_keys.py) are written once; each side supplies its
stores (the agent's SQLite stores, the cloud's PostgreSQL under row-level security), its event
log, its login throttle, how it opens a session, and who decides identity there. Two type
parameters keep each side's own types: ``U``, a user row as its store returns it (an
``sqlite3.Row`` or an ``asyncpg.Record``, both read by column name), and ``C``, where a request
came from (the agent's address, the cloud's address and user agent).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar

from protocol.schemas.auth import LoginResult

__all__ = [
    "AuthEventLog",
    "C",
    "IdentityAuthority",
    "LoginThrottle",
    "SelfGoverned",
    "SessionOpener",
    "TokenPurpose",
    "U",
    "UserRow",
]

TokenPurpose = Literal["verify_email", "reset_password", "mfa_challenge"]


class UserRow(Protocol):
    """A user as a store returns it, read by column name (``id``, ``email``, ``status``...)."""

    def __getitem__(self, key: str, /) -> Any:
        """The value of a column."""
        ...


U = TypeVar("U", bound=UserRow)
C = TypeVar("C")
U_contra = TypeVar("U_contra", bound=UserRow, contravariant=True)
C_contra = TypeVar("C_contra", contravariant=True)


class AuthEventLog(Protocol):
    """The authentication log."""

    async def record(
        self,
        kind: str,
        *,
        user_id: Any = None,
        email: str | None = None,
        address: str | None = None,
        **detail: Any,
    ) -> None:
        """Append one event; secrets never go in ``detail``."""
        ...


class LoginThrottle(Protocol[C_contra]):
    """Refuses (429) an account or address with too many recent failures."""

    async def check(self, email: str, origin: C_contra, /) -> None:
        """Raise RateLimited while ``email`` or the origin's address is throttled."""
        ...


class SessionOpener(Protocol[U_contra, C_contra]):
    """Opens a session: tokens for ``user``, recorded as ``login_ok`` with ``detail``."""

    async def open(self, user: U_contra, origin: C_contra, **detail: Any) -> LoginResult:
        """A new session with its first refresh token."""
        ...


class IdentityAuthority(Protocol[U_contra]):
    """Who decides identity on this side: a paired agent leaves most of it to the cloud."""

    def refuse_new(self, change: str) -> None:
        """Raise ManagedByCloud if new users and grants are not made here."""
        ...

    def refuse_for(self, user: U_contra | None, change: str) -> None:
        """Raise ManagedByCloud if ``user``'s identity is not changed here."""
        ...

    def manages(self, user: U_contra) -> bool:
        """Whether ``user``'s password and MFA are set here."""
        ...


class SelfGoverned:
    """The authority of a side that decides all identity itself (the cloud): refuses nothing."""

    def refuse_new(self, change: str) -> None:
        """Nothing is made elsewhere."""

    def refuse_for(self, user: UserRow | None, change: str) -> None:
        """Nobody is managed elsewhere."""

    def manages(self, user: UserRow) -> bool:
        """Every user is managed here."""
        return True
