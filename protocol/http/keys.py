"""Typed keys under which middlewares leave per-request state on the aiohttp request."""

from __future__ import annotations

from aiohttp import web

from protocol.http.ratelimit_verdict import Verdict
from protocol.identity import Principal

REQUEST_ID = web.RequestKey("request_id", str)
PRINCIPAL: web.RequestKey[Principal | None] = web.RequestKey("principal")
RATE_LIMIT: web.RequestKey[Verdict | None] = web.RequestKey("rate_limit")
