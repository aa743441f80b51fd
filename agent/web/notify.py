"""/api/v1/contact-points, /notification-rules, /notifications (declared in
protocol.http.notify_routes, shared with the cloud)."""

from __future__ import annotations

from agent.web.keys import NOTIFY
from protocol.http.notify_routes import notify_api

api = notify_api(lambda app: app[NOTIFY])
