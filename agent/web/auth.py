"""/api/v1/login and /auth/*: the shared authentication endpoints (protocol/http/auth_routes.py)
served by the agent's identity services; and /api/v1/auth-events (protocol/http/user_routes.py)."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from agent.web.keys import AUTH_EVENTS, AUTH_FLOWS, IDENTITY
from protocol.http.auth_routes import auth_api
from protocol.http.endpoints import principal_of
from protocol.http.user_routes import auth_events_api
from protocol.schemas.auth import (
    LoginRequest,
    LoginResult,
    RefreshRequest,
    TokenInfo,
)

__all__ = ["api"]


class _AgentAuth:
    """The agent's side of each authentication endpoint."""

    async def login(self, request: web.Request, body: LoginRequest) -> BaseModel:
        return await request.app[IDENTITY].login(body, request.remote)

    async def refresh(self, request: web.Request, body: RefreshRequest) -> LoginResult:
        return await request.app[IDENTITY].refresh(body, request.remote)

    async def logout(self, request: web.Request) -> None:
        await request.app[IDENTITY].logout(principal_of(request), request.remote)

    async def token_info(self, request: web.Request) -> TokenInfo:
        return await request.app[IDENTITY].token_info(principal_of(request))


api = auth_api(
    _AgentAuth(), lambda request: request.app[AUTH_FLOWS], lambda request: request.remote
)
api.extend(auth_events_api(lambda app: app[AUTH_EVENTS], "Authentication"))
