"""/api/v1/users, /api/v1/users/profile, /api/v1/users/permissions and /api/v1/permissions:
thin handlers over the user and permission services (declared in protocol.http.user_routes,
shared with the cloud)."""

from __future__ import annotations

from agent.web.keys import PERMISSIONS, USERS
from protocol.http.user_routes import users_api

api = users_api(lambda app: app[USERS], lambda app: app[PERMISSIONS])
