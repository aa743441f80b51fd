"""/api/v1/webhooks: outgoing webhooks (declared in protocol.http.webhook_routes, shared with
the cloud)."""

from __future__ import annotations

from agent.web.keys import WEBHOOKS
from protocol.http.webhook_routes import webhooks_api

api = webhooks_api(lambda app: app[WEBHOOKS])
