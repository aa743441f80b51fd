"""/auth/mfa/*: TOTP enrolment for the caller and the second step of login."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from agent.web.keys import MFA
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.auth import (
    LoginResult,
    MfaCodeRequest,
    MfaEnrolment,
    MfaStatus,
    MfaVerifyRequest,
)

api = Api()
_TAG = "Authentication"


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
    return await request.app[MFA].enrol(principal_of(request), request.remote)


@api.route(
    "POST",
    "/auth/mfa/confirm",
    summary="Turn MFA on with a code from the enrolled app",
    tag=_TAG,
    body=MfaCodeRequest,
    response=MfaStatus,
    errors=(409,),
)
async def confirm_mfa(request: web.Request, body: MfaCodeRequest) -> BaseModel:
    """MFA on; the caller's other sessions end."""
    mfa = request.app[MFA]
    return await mfa.confirm(principal_of(request), body, request.remote)


@api.route(
    "POST",
    "/auth/mfa/disable",
    summary="Turn MFA off with a current code",
    tag=_TAG,
    body=MfaCodeRequest,
    response=MfaStatus,
)
async def disable_mfa(request: web.Request, body: MfaCodeRequest) -> BaseModel:
    """MFA off; the caller's other sessions end."""
    mfa = request.app[MFA]
    return await mfa.disable(principal_of(request), body, request.remote)


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
async def verify_mfa(request: web.Request, body: MfaVerifyRequest) -> BaseModel:
    """Tokens for a new session; the challenge works once."""
    return await request.app[MFA].verify(body, request.remote)
