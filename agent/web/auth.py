"""/api/v1/login and /auth/*: login, refresh, logout, registration, verification, password
reset; and /api/v1/auth-events. Thin handlers over the identity services."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from agent.web.keys import AUTH_EVENTS, AUTH_FLOWS, IDENTITY
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.auth import (
    Accepted,
    AuthEventList,
    AuthEventQuery,
    LoginAnswer,
    LoginRequest,
    LoginResult,
    RefreshRequest,
    RegisterRequest,
    ResetPasswordConfirm,
    ResetPasswordRequest,
    TokenInfo,
    VerifyEmailRequest,
    VerifyEmailResult,
)
from protocol.schemas.users import User

api = Api()
_TAG = "Authentication"


async def _login(request: web.Request, body: LoginRequest) -> BaseModel:
    return await request.app[IDENTITY].login(body, request.remote)


@api.route(
    "POST",
    "/api/v1/login",
    summary="Log in with email and password",
    tag=_TAG,
    body=LoginRequest,
    response=LoginAnswer,
    auth=False,
    errors=(400, 401),
)
async def login(request: web.Request, body: LoginRequest) -> BaseModel:
    """Tokens, or ``{"mfa_required": true, "challenge": ...}`` for an account with MFA."""
    return await _login(request, body)


@api.route(
    "POST",
    "/auth/login",
    summary="Log in (same as /api/v1/login)",
    tag=_TAG,
    body=LoginRequest,
    response=LoginAnswer,
    auth=False,
    errors=(400, 401),
)
async def auth_login(request: web.Request, body: LoginRequest) -> BaseModel:
    """Tokens, or ``{"mfa_required": true, "challenge": ...}`` for an account with MFA."""
    return await _login(request, body)


@api.route(
    "POST",
    "/auth/refresh",
    summary="Exchange a refresh token for new tokens (rotated; reuse revokes the session)",
    tag=_TAG,
    body=RefreshRequest,
    response=LoginResult,
    auth=False,
    errors=(401,),
)
async def refresh(request: web.Request, body: RefreshRequest) -> LoginResult:
    """New access and refresh tokens; the refresh token sent is spent."""
    return await request.app[IDENTITY].refresh(body, request.remote)


@api.route(
    "POST",
    "/auth/logout",
    summary="End the caller's session now",
    tag=_TAG,
    status=204,
    errors=(400,),
)
async def logout(request: web.Request) -> None:
    """Revoke the session: its access and refresh tokens stop working at once."""
    await request.app[IDENTITY].logout(principal_of(request), request.remote)


@api.route(
    "POST",
    "/auth/register",
    summary="Create an account (role user, no farms until granted)",
    tag=_TAG,
    body=RegisterRequest,
    response=User,
    status=201,
    auth=False,
    errors=(401, 403, 409),
)
async def register(request: web.Request, body: RegisterRequest) -> User:
    """A new account; a verification token is mailed to the address."""
    return await request.app[AUTH_FLOWS].register(body, request.remote)


@api.route(
    "GET",
    "/auth/verify",
    summary="Verify the bearer token (or API key) and tell whose it is",
    tag=_TAG,
    response=TokenInfo,
)
async def verify_token(request: web.Request) -> TokenInfo:
    """The caller's identity, if the credential is valid (401 otherwise)."""
    return await request.app[IDENTITY].token_info(principal_of(request))


@api.route(
    "POST",
    "/auth/verify",
    summary="Verify an email address with the mailed token",
    tag=_TAG,
    body=VerifyEmailRequest,
    response=VerifyEmailResult,
    auth=False,
    errors=(401,),
)
async def verify_email(request: web.Request, body: VerifyEmailRequest) -> VerifyEmailResult:
    """Mark the address verified; the token works once."""
    return await request.app[AUTH_FLOWS].verify_email(body)


@api.route(
    "POST",
    "/auth/reset-password",
    summary="Ask for a password reset token by mail",
    tag=_TAG,
    body=ResetPasswordRequest,
    response=Accepted,
    status=202,
    auth=False,
    errors=(401,),
)
async def reset_password(request: web.Request, body: ResetPasswordRequest) -> Accepted:
    """The same answer whether or not the address has an account."""
    return await request.app[AUTH_FLOWS].request_reset(body, request.remote)


@api.route(
    "POST",
    "/auth/reset-password/confirm",
    summary="Set a new password with a reset token",
    tag=_TAG,
    body=ResetPasswordConfirm,
    status=204,
    auth=False,
    errors=(401,),
)
async def confirm_reset_password(request: web.Request, body: ResetPasswordConfirm) -> None:
    """The token works once; every session of the account ends."""
    await request.app[AUTH_FLOWS].confirm_reset(body, request.remote)


@api.route(
    "GET",
    "/api/v1/auth-events",
    summary="Authentication events, newest first (admins)",
    tag=_TAG,
    query=AuthEventQuery,
    response=AuthEventList,
    errors=(403,),
)
async def list_auth_events(request: web.Request, query: AuthEventQuery) -> AuthEventList:
    """Logins, failures, logouts, refresh reuse, MFA, API keys and password resets."""
    return await request.app[AUTH_EVENTS].list(principal_of(request), query)
