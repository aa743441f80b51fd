"""/api/v1/webhooks on the cloud: the agent's declarations (protocol.http.webhook_routes) over
the cloud's webhook service."""

from __future__ import annotations

from cloud.web.keys import WEBHOOKS
from protocol.http.webhook_routes import webhooks_api

api = webhooks_api(lambda app: app[WEBHOOKS])
