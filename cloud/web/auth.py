"""/api/v1/login and /auth/*: the shared authentication endpoints (protocol/http/auth_routes.py)
served by the cloud's identity services; thin adapters only."""

from __future__ import annotations

import ipaddress

from aiohttp import web
from pydantic import BaseModel

from cloud.services.sessions import Client
from cloud.web.keys import AUTH_FLOWS, IDENTITY, SESSIONS
from protocol.http.auth_routes import auth_api
from protocol.http.endpoints import principal_of
from protocol.schemas.auth import (
    LoginRequest,
    LoginResult,
    RefreshRequest,
    TokenInfo,
)

__all__ = ["api", "client_of"]


def client_of(request: web.Request) -> Client:
    """The caller's address (when it is an IP address) and user agent, for the auth log."""
    remote = request.remote
    try:
        ip = str(ipaddress.ip_address(remote)) if remote else None
    except ValueError:
        ip = None
    return Client(ip=ip, user_agent=request.headers.get("User-Agent", "")[:512] or None)


class _CloudAuth:
    """The cloud's side of each authentication endpoint."""

    async def login(self, request: web.Request, body: LoginRequest) -> BaseModel:
        return await request.app[IDENTITY].login(body, client_of(request))

    async def refresh(self, request: web.Request, body: RefreshRequest) -> LoginResult:
        return await request.app[SESSIONS].refresh(body, client_of(request))

    async def logout(self, request: web.Request) -> None:
        await request.app[SESSIONS].logout(principal_of(request), client_of(request))

    async def token_info(self, request: web.Request) -> TokenInfo:
        return await request.app[SESSIONS].token_info(principal_of(request))


api = auth_api(_CloudAuth(), lambda request: request.app[AUTH_FLOWS], client_of)
