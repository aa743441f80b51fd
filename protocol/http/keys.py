"""Typed keys under which middlewares leave per-request state on the aiohttp request, and the
application-wide set of endpoints that need no caller."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from protocol.http.ratelimit_verdict import Verdict
from protocol.identity import Principal

REQUEST_ID = web.RequestKey("request_id", str)
PRINCIPAL: web.RequestKey[Principal | None] = web.RequestKey("principal")
AUTH_FAILURE: web.RequestKey[Exception] = web.RequestKey("auth_failure")
"""Why the credentials sent were refused; raised where the endpoint needs a caller."""
RATE_LIMIT: web.RequestKey[Verdict | None] = web.RequestKey("rate_limit")
PUBLIC_HANDLERS: web.AppKey[set[Callable[..., Any]]] = web.AppKey("public_handlers")
"""Handlers of endpoints declared ``auth=False``: stale credentials sent to them are ignored."""
