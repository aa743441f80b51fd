"""/api/v1/contact-points, /notification-rules, /notifications (declared in
integrations.notify.routes, shared with the cloud)."""

from __future__ import annotations

from agent.web.keys import NOTIFY
from integrations.notify.routes import notify_api

api = notify_api(lambda app: app[NOTIFY])
