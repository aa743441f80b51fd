"""/api/v1/login and /auth/*: the shared authentication endpoints (protocol/http/auth_routes.py)
served by the agent's instances of the shared identity flows; and /api/v1/auth-events
(protocol/http/user_routes.py)."""

from __future__ import annotations

from agent.web.keys import AUTH_EVENTS, AUTH_FLOWS, LOGIN, SESSIONS
from protocol.http.auth_routes import auth_api
from protocol.http.user_routes import auth_events_api

__all__ = ["api"]

api = auth_api(
    lambda request: request.app[LOGIN],
    lambda request: request.app[SESSIONS],
    lambda request: request.app[AUTH_FLOWS],
    lambda request: request.remote,
)
api.extend(auth_events_api(lambda app: app[AUTH_EVENTS], "Authentication"))
