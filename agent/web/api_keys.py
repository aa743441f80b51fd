"""/api/v1/api-keys: admins create, list and revoke API keys (sent as ``X-API-Key``; declared in
protocol.http.user_routes, shared with the cloud)."""

from __future__ import annotations

from agent.web.keys import API_KEYS
from protocol.http.user_routes import api_keys_api

api = api_keys_api(lambda app: app[API_KEYS])
