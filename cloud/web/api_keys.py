"""/api/v1/api-keys on the cloud: the agent's declarations (protocol.http.user_routes) over the
cloud's API key service."""

from __future__ import annotations

from cloud.web.keys import API_KEYS
from protocol.http.user_routes import api_keys_api

api = api_keys_api(lambda app: app[API_KEYS])
