"""Login, tokens, MFA, API keys and authentication events (docs/design.md section 4)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, RootModel, StringConstraints, WithJsonSchema

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

__all__ = [
    "Accepted",
    "ApiKey",
    "ApiKeyCreate",
    "ApiKeyCreated",
    "ApiKeyList",
    "ApiKeyListQuery",
    "AuthEvent",
    "AuthEventKind",
    "AuthEventList",
    "AuthEventQuery",
    "Email",
    "LoginAnswer",
    "LoginRequest",
    "LoginResult",
    "MfaChallenge",
    "MfaCode",
    "MfaCodeRequest",
    "MfaEnrolment",
    "MfaStatus",
    "MfaVerifyRequest",
    "Page",
    "Password",
    "RefreshBody",
    "RefreshRequest",
    "RegisterRequest",
    "ResetPasswordConfirm",
    "ResetPasswordRequest",
    "TokenInfo",
    "UserRef",
    "UuidIn",
    "VerifyEmailRequest",
    "VerifyEmailResult",
]

Email = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, to_lower=True, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$"
    ),
]
"""An address with one @; deliverability is proven by /auth/verify, not by a regex."""


def _canonical_uuid(text: str) -> str:
    return str(uuid.UUID(text))


UuidIn = Annotated[
    str, AfterValidator(_canonical_uuid), WithJsonSchema({"type": "string", "format": "uuid"})
]
"""An id sent by a client: any UUID spelling is accepted and stored in canonical form."""

Password = Annotated[str, StringConstraints(min_length=8, max_length=256)]
"""New passwords: at least 8 characters (NIST SP 800-63B 5.1.1.2)."""


class LoginRequest(ApiModel):
    """POST /api/v1/login and /auth/login."""

    email: str = Field(min_length=1, max_length=254)
    password: str = Field(min_length=1, max_length=256)


class UserRef(Schema):
    """The logged-in user inside a login result."""

    id: Uuid
    email: str
    role: str


class LoginResult(Schema):
    """Tokens for a new session."""

    access_token: str
    token_type: str = "bearer"
    expires_in: int
    refresh_token: str
    user: UserRef


class MfaChallenge(Schema):
    """The login answer for an account with MFA: exchange ``challenge`` at /auth/mfa/verify."""

    mfa_required: Literal[True] = True
    challenge: str
    expires_in: int


class LoginAnswer(RootModel[LoginResult | MfaChallenge]):
    """Tokens, or an MFA challenge when the account has MFA enabled."""


class RefreshRequest(ApiModel):
    """POST /auth/refresh: a refresh token is used once and replaced."""

    refresh_token: str = Field(min_length=1, max_length=256)


class RefreshBody(ApiModel):
    """The body of POST /auth/refresh: the token, or nothing for the web app's cookie session."""

    refresh_token: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Omit only with the farm_refresh cookie and the X-CSRF-Token header",
    )


class RegisterRequest(ApiModel):
    """POST /auth/register."""

    email: Email
    password: Password
    full_name: str = Field("", max_length=200)


class TokenInfo(Schema):
    """GET /auth/verify: the bearer token is valid; who it belongs to."""

    valid: Literal[True] = True
    user: UserRef
    session_id: Uuid | None
    api_key_id: Uuid | None
    session_expires_at: Timestamp | None = Field(
        description="When the session ends unless refreshed; null for an API key"
    )


class VerifyEmailRequest(ApiModel):
    """POST /auth/verify: the token from the verification mail."""

    token: str = Field(min_length=1, max_length=256)


class VerifyEmailResult(Schema):
    """The address is verified."""

    email: str
    email_verified: Literal[True] = True


class ResetPasswordRequest(ApiModel):
    """POST /auth/reset-password: mail a reset token if the address has an account."""

    email: Email


class ResetPasswordConfirm(ApiModel):
    """POST /auth/reset-password/confirm."""

    token: str = Field(min_length=1, max_length=256)
    new_password: Password


class Accepted(Schema):
    """A request taken in, with the same answer whatever the outcome (no account disclosure)."""

    status: Literal["accepted"] = "accepted"
    message: str


class Page(PageQuery):
    """``PageQuery`` with ``offset`` bounded to what SQLite's 64-bit integers hold."""

    offset: int = Field(0, ge=0, le=2**62)


MfaCode = Annotated[str, StringConstraints(pattern=r"^\d{6}$")]
"""Six digits from the authenticator app (RFC 6238 defaults)."""


class MfaEnrolment(Schema):
    """POST /auth/mfa/enrol: add the secret to an app, then confirm with a code."""

    secret: str
    otpauth_uri: str


class MfaCodeRequest(ApiModel):
    """POST /auth/mfa/confirm and /auth/mfa/disable."""

    code: MfaCode


class MfaStatus(Schema):
    """Whether MFA is on for the caller."""

    mfa_enabled: bool


class MfaVerifyRequest(ApiModel):
    """POST /auth/mfa/verify: the login challenge and a current code."""

    challenge: str = Field(min_length=1, max_length=256)
    code: MfaCode


class ApiKeyCreate(ApiModel):
    """POST /api/v1/api-keys (admin): a key acting as ``user_id``."""

    user_id: UuidIn
    name: str = Field(min_length=1, max_length=100)


class ApiKey(Schema):
    """An API key as listed; the key itself is never shown again."""

    id: Uuid
    user_id: Uuid
    name: str
    prefix: str
    created_by: Uuid | None
    created_at: Timestamp
    last_used_at: Timestamp | None
    revoked_at: Timestamp | None


class ApiKeyCreated(ApiKey):
    """The new key: ``key`` is shown this once; send it as ``X-API-Key``."""

    key: str


class ApiKeyListQuery(Page):
    """GET /api/v1/api-keys filters."""

    user_id: UuidIn | None = None
    include_revoked: bool = False


class ApiKeyList(Schema):
    """A page of API keys."""

    api_keys: list[ApiKey]
    total: int
    limit: int
    offset: int


AuthEventKind = Literal[
    "login_ok",
    "login_failed",
    "login_throttled",
    "logout",
    "refresh_reuse",
    "registered",
    "register_known_address",
    "email_verified",
    "password_reset_requested",
    "password_reset",
    "password_changed",
    "mfa_challenge",
    "mfa_failed",
    "mfa_enrolled",
    "mfa_enabled",
    "mfa_disabled",
    "api_key_created",
    "api_key_revoked",
    "sessions_revoked",
]


class AuthEvent(Schema):
    """One recorded authentication event."""

    id: Uuid
    kind: str
    user_id: Uuid | None
    email: str | None
    address: str | None
    detail: dict[str, Any]
    created_at: Timestamp


class AuthEventQuery(Page):
    """GET /api/v1/auth-events filters (newest first)."""

    user_id: UuidIn | None = None
    kind: AuthEventKind | None = None
    since: datetime | None = None


class AuthEventList(Schema):
    """A page of authentication events."""

    auth_events: list[AuthEvent]
    total: int
    limit: int
    offset: int
