"""/auth/mfa/*: the shared MFA endpoints (protocol/http/auth_routes.py) served by the agent."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import MFA
from protocol.http.auth_routes import mfa_api
from protocol.http.endpoints import principal_of
from protocol.schemas.auth import (
    LoginResult,
    MfaCodeRequest,
    MfaEnrolment,
    MfaStatus,
    MfaVerifyRequest,
)

__all__ = ["api"]


class _AgentMfa:
    """The agent's side of each MFA endpoint."""

    async def enrol(self, request: web.Request) -> MfaEnrolment:
        return await request.app[MFA].enrol(principal_of(request), request.remote)

    async def confirm(self, request: web.Request, body: MfaCodeRequest) -> MfaStatus:
        return await request.app[MFA].confirm(principal_of(request), body, request.remote)

    async def disable(self, request: web.Request, body: MfaCodeRequest) -> MfaStatus:
        return await request.app[MFA].disable(principal_of(request), body, request.remote)

    async def verify(self, request: web.Request, body: MfaVerifyRequest) -> LoginResult:
        return await request.app[MFA].verify(body, request.remote)


api = mfa_api(_AgentMfa())
