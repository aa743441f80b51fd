"""The authentication endpoints agent and cloud both serve (docs/design.md 4), declared once.

Both sides offer the same paths with the same schemas and status codes; each supplies its
instances of the shared identity flows (protocol/identity_flows) and how it describes where a
request came from. Declaring the routes
here keeps the two APIs from drifting apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel

from protocol.http.browser_session import (
    clear_session_cookies,
    cookie_refresh_token,
    session_response,
    wants_cookie,
)
from protocol.http.endpoints import Api, principal_of
from protocol.identity_flows.account_flows import AccountFlows
from protocol.identity_flows.login import LoginFlow
from protocol.identity_flows.mfa import MfaFlows
from protocol.identity_flows.sessions import SessionFlows
from protocol.schemas.auth import (
    Accepted,
    LoginAnswer,
    LoginRequest,
    LoginResult,
    MfaCodeRequest,
    MfaEnrolment,
    MfaStatus,
    MfaVerifyRequest,
    RefreshBody,
    RefreshRequest,
    RegisterRequest,
    ResetPasswordConfirm,
    ResetPasswordRequest,
    TokenInfo,
    VerifyEmailRequest,
    VerifyEmailResult,
)

__all__ = ["auth_api", "mfa_api"]

C = TypeVar("C")

_TAG = "Authentication"


def _answer(request: web.Request, result: BaseModel) -> BaseModel | web.Response:
    """Tokens as JSON, or for a browser asking ``X-Session-Cookie: 1`` with the refresh token
    moved into the httpOnly cookie (protocol/http/browser_session.py)."""
    if isinstance(result, LoginResult) and wants_cookie(request):
        return session_response(request, result)
    return result


Origin = Callable[[web.Request], C]


def auth_api(
    login_of: Callable[[web.Request], LoginFlow[Any, C]],
    sessions_of: Callable[[web.Request], SessionFlows[Any, C]],
    flows_of: Callable[[web.Request], AccountFlows[Any, C]],
    origin_of: Origin[C],
) -> Api:
    """/api/v1/login and /auth/*: login, refresh, logout, registration, verification and reset,
    answered by the side's instances of the shared flows (``login_of(request)`` and so on), told
    where the request came from by ``origin_of``."""
    api = Api()

    @api.route(
        "POST",
        "/api/v1/login",
        summary="Log in with email and password",
        tag=_TAG,
        body=LoginRequest,
        response=LoginAnswer,
        auth=False,
        errors=(400, 401, 403),
    )
    async def login(request: web.Request, body: LoginRequest) -> BaseModel | web.Response:
        """Tokens, or ``{"mfa_required": true, "challenge": ...}`` for an account with MFA.

        With the header ``X-Session-Cookie: 1`` the refresh token is set as an httpOnly cookie
        (``farm_refresh``, with a ``farm_csrf`` cookie for the refresh's CSRF header) instead of
        being returned in the body."""
        return _answer(request, await login_of(request).login(body, origin_of(request)))

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
    async def auth_login(request: web.Request, body: LoginRequest) -> BaseModel | web.Response:
        """Tokens, or ``{"mfa_required": true, "challenge": ...}`` for an account with MFA."""
        return _answer(request, await login_of(request).login(body, origin_of(request)))

    @api.route(
        "POST",
        "/auth/refresh",
        summary="Exchange a refresh token for new tokens (rotated; reuse revokes the session)",
        tag=_TAG,
        body=RefreshBody,
        response=LoginResult,
        auth=False,
        errors=(401, 403),
    )
    async def refresh(request: web.Request, body: RefreshBody) -> BaseModel | web.Response:
        """New access and refresh tokens; the refresh token sent is spent.

        The web app sends no token: its ``farm_refresh`` cookie is used, with the
        ``X-CSRF-Token`` header equal to the ``farm_csrf`` cookie (403 otherwise)."""
        token = body.refresh_token or cookie_refresh_token(request)
        refreshed = await sessions_of(request).refresh(
            RefreshRequest(refresh_token=token), origin_of(request)
        )
        return _answer(request, refreshed)

    @api.route(
        "POST",
        "/auth/logout",
        summary="End the caller's session now",
        tag=_TAG,
        status=204,
        errors=(400,),
    )
    async def logout(request: web.Request) -> web.Response:
        """Revoke the session: its access and refresh tokens stop working at once; the web
        app's session cookies are cleared."""
        await sessions_of(request).logout(principal_of(request), origin_of(request))
        response = web.Response(status=204)
        clear_session_cookies(response)
        return response

    @api.route(
        "POST",
        "/auth/register",
        summary="Create an account (role user, no farms until granted); the same answer whether"
        " or not the address has one, the mail says which",
        tag=_TAG,
        body=RegisterRequest,
        response=Accepted,
        status=202,
        auth=False,
        # 409 MANAGED_BY_CLOUD: a paired agent's accounts are made in the cloud.
        errors=(403, 409),
    )
    async def register(request: web.Request, body: RegisterRequest) -> Accepted:
        """Accepted; a verification token (or a note that the address is known) is mailed."""
        return await flows_of(request).register(body, origin_of(request))

    @api.route(
        "GET",
        "/auth/verify",
        summary="Verify the bearer token (or API key) and tell whose it is",
        tag=_TAG,
        response=TokenInfo,
    )
    async def verify_token(request: web.Request) -> TokenInfo:
        """The caller's identity, if the credential is valid (401 otherwise)."""
        return await sessions_of(request).token_info(principal_of(request))

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
        return await flows_of(request).verify_email(body, origin_of(request))

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
        return await flows_of(request).request_reset(body, origin_of(request))

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
        await flows_of(request).confirm_reset(body, origin_of(request))

    return api


def mfa_api(mfa_of: Callable[[web.Request], MfaFlows[Any, C]], origin_of: Origin[C]) -> Api:
    """/auth/mfa/*: TOTP enrolment for the caller and the second step of login, answered by the
    shared MFA flows ``mfa_of(request)`` returns."""
    api = Api()

    @api.route(
        "POST",
        "/auth/mfa/enrol",
        summary="Start MFA enrolment: a TOTP secret and otpauth URI",
        tag=_TAG,
        response=MfaEnrolment,
        errors=(409,),
    )
    async def enrol_mfa(request: web.Request) -> MfaEnrolment:
        """A new secret for an authenticator app; MFA is on only after /auth/mfa/confirm."""
        return await mfa_of(request).enrol(principal_of(request), origin_of(request))

    @api.route(
        "POST",
        "/auth/mfa/confirm",
        summary="Turn MFA on with a code from the enrolled app",
        tag=_TAG,
        body=MfaCodeRequest,
        response=MfaStatus,
        errors=(409,),
    )
    async def confirm_mfa(request: web.Request, body: MfaCodeRequest) -> MfaStatus:
        """MFA on; the caller's other sessions end."""
        return await mfa_of(request).confirm(principal_of(request), body, origin_of(request))

    @api.route(
        "POST",
        "/auth/mfa/disable",
        summary="Turn MFA off with a current code",
        tag=_TAG,
        body=MfaCodeRequest,
        response=MfaStatus,
        errors=(409,),
    )
    async def disable_mfa(request: web.Request, body: MfaCodeRequest) -> MfaStatus:
        """MFA off; the caller's other sessions end."""
        return await mfa_of(request).disable(principal_of(request), body, origin_of(request))

    @api.route(
        "POST",
        "/auth/mfa/verify",
        summary="Exchange a login MFA challenge and a code for tokens",
        tag=_TAG,
        body=MfaVerifyRequest,
        response=LoginResult,
        auth=False,
        errors=(401,),
    )
    async def verify_mfa(request: web.Request, body: MfaVerifyRequest) -> BaseModel | web.Response:
        """Tokens for a new session; the challenge works once (``X-Session-Cookie`` as login)."""
        return _answer(request, await mfa_of(request).verify(body, origin_of(request)))

    return api
