"""/api/v1/login and /auth/*: thin handlers over IdentityService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import IDENTITY
from protocol.http.endpoints import Api
from protocol.schemas.auth import LoginRequest, LoginResult

api = Api()
_TAG = "Authentication"


async def _login(request: web.Request, body: LoginRequest) -> LoginResult:
    return await request.app[IDENTITY].login(body)


@api.route(
    "POST",
    "/api/v1/login",
    summary="Log in with email and password",
    tag=_TAG,
    body=LoginRequest,
    response=LoginResult,
    auth=False,
    errors=(400,),
)
async def login(request: web.Request, body: LoginRequest) -> LoginResult:
    """Exchange credentials for an access and a refresh token."""
    return await _login(request, body)


@api.route(
    "POST",
    "/auth/login",
    summary="Log in (same as /api/v1/login)",
    tag=_TAG,
    body=LoginRequest,
    response=LoginResult,
    auth=False,
    errors=(400,),
)
async def auth_login(request: web.Request, body: LoginRequest) -> LoginResult:
    """Exchange credentials for an access and a refresh token."""
    return await _login(request, body)
