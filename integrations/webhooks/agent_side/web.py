"""/api/v1/webhooks: outgoing webhooks (declared in integrations.webhooks.routes, shared with
the cloud)."""

from __future__ import annotations

from agent.web.keys import WEBHOOKS
from integrations.webhooks.routes import webhooks_api

api = webhooks_api(lambda app: app[WEBHOOKS])
