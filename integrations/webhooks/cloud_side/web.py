"""/api/v1/webhooks on the cloud: the agent's declarations (integrations.webhooks.routes) over
the cloud's webhook service."""

from __future__ import annotations

from cloud.web.keys import WEBHOOKS
from integrations.webhooks.routes import webhooks_api

api = webhooks_api(lambda app: app[WEBHOOKS])
