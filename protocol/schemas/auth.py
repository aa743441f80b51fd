"""Login, tokens and the caller's identity (SPEC.md "Login result")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from protocol.schemas.common import ApiModel, Uuid

__all__ = ["Email", "LoginRequest", "LoginResult", "Password", "UserRef"]

Email = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, to_lower=True, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$"
    ),
]
"""An address with one @; deliverability is proven by /auth/verify, not by a regex."""

Password = Annotated[str, StringConstraints(min_length=8, max_length=256)]
"""New passwords: at least 8 characters (NIST SP 800-63B 5.1.1.2)."""


class LoginRequest(ApiModel):
    """POST /api/v1/login and /auth/login."""

    email: str = Field(min_length=1, max_length=254)
    password: str = Field(min_length=1, max_length=256)


class UserRef(BaseModel):
    """The logged-in user inside a login result."""

    id: Uuid
    email: str
    role: str


class LoginResult(BaseModel):
    """Tokens for a new session."""

    access_token: str
    token_type: str = "bearer"
    expires_in: int
    refresh_token: str
    user: UserRef
