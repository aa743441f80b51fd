"""/api/v1/login and /auth/login: thin handlers over IdentityService."""

from __future__ import annotations

import ipaddress

from aiohttp import web

from cloud.services.identity import Client
from cloud.web.keys import IDENTITY
from protocol.http.endpoints import Api
from protocol.schemas.auth import LoginRequest, LoginResult

api = Api()
_TAG = "Authentication"


def client_of(request: web.Request) -> Client:
    """The caller's address (when it is an IP address) and user agent, for the auth log."""
    remote = request.remote
    try:
        ip = str(ipaddress.ip_address(remote)) if remote else None
    except ValueError:
        ip = None
    return Client(ip=ip, user_agent=request.headers.get("User-Agent", "")[:512] or None)


async def _login(request: web.Request, body: LoginRequest) -> LoginResult:
    return await request.app[IDENTITY].login(body, client_of(request))


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
