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
    Accepted,
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

__all__ = ["api"]


class _AgentAuth:
    """The agent's side of each authentication endpoint."""

    async def login(self, request: web.Request, body: LoginRequest) -> BaseModel:
        return await request.app[IDENTITY].login(body, request.remote)

    async def refresh(self, request: web.Request, body: RefreshRequest) -> LoginResult:
        return await request.app[IDENTITY].refresh(body, request.remote)

    async def logout(self, request: web.Request) -> None:
        await request.app[IDENTITY].logout(principal_of(request), request.remote)

    async def register(self, request: web.Request, body: RegisterRequest) -> Accepted:
        return await request.app[AUTH_FLOWS].register(body, request.remote)

    async def token_info(self, request: web.Request) -> TokenInfo:
        return await request.app[IDENTITY].token_info(principal_of(request))

    async def verify_email(
        self, request: web.Request, body: VerifyEmailRequest
    ) -> VerifyEmailResult:
        return await request.app[AUTH_FLOWS].verify_email(body, request.remote)

    async def request_reset(self, request: web.Request, body: ResetPasswordRequest) -> Accepted:
        return await request.app[AUTH_FLOWS].request_reset(body, request.remote)

    async def confirm_reset(self, request: web.Request, body: ResetPasswordConfirm) -> None:
        await request.app[AUTH_FLOWS].confirm_reset(body, request.remote)


api = auth_api(_AgentAuth())
api.extend(auth_events_api(lambda app: app[AUTH_EVENTS], "Authentication"))
