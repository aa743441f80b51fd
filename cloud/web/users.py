"""/api/v1/users, /api/v1/users/profile, /api/v1/users/permissions, /api/v1/permissions and
/api/v1/auth-events on the cloud: the agent's declarations (protocol.http.user_routes) over the
cloud's services."""

from __future__ import annotations

from cloud.web.keys import AUTH_EVENTS, PERMISSIONS, USERS
from protocol.http.endpoints import Api
from protocol.http.user_routes import auth_events_api, users_api

api = Api()
api.extend(users_api(lambda app: app[USERS], lambda app: app[PERMISSIONS]))
api.extend(auth_events_api(lambda app: app[AUTH_EVENTS], "Authentication"))
