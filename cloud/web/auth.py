"""/api/v1/login and /auth/*: the shared authentication endpoints (protocol/http/auth_routes.py)
served by the cloud's instances of the shared identity flows."""

from __future__ import annotations

import ipaddress

from aiohttp import web

from cloud.store.origin import Client
from cloud.web.keys import AUTH_FLOWS, LOGIN, SESSIONS
from protocol.http.auth_routes import auth_api

__all__ = ["api", "client_of"]


def client_of(request: web.Request) -> Client:
    """The caller's address (when it is an IP address) and user agent, for the auth log."""
    remote = request.remote
    try:
        ip = str(ipaddress.ip_address(remote)) if remote else None
    except ValueError:
        ip = None
    return Client(ip=ip, user_agent=request.headers.get("User-Agent", "")[:512] or None)


api = auth_api(
    lambda request: request.app[LOGIN],
    lambda request: request.app[SESSIONS],
    lambda request: request.app[AUTH_FLOWS],
    client_of,
)
