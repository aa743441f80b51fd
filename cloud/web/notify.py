"""/api/v1/notifications on the cloud: the history of what it sent, declared with the agent's
(integrations/notify/routes.py)."""

from __future__ import annotations

from cloud.web.keys import NOTIFY_HISTORY
from integrations.notify.routes import history_api

api = history_api(lambda app: app[NOTIFY_HISTORY])
