"""/auth/mfa/*: the shared MFA endpoints (protocol/http/auth_routes.py) served by the cloud's
instance of the shared MFA flows."""

from __future__ import annotations

from cloud.web.auth import client_of
from cloud.web.keys import MFA
from protocol.http.auth_routes import mfa_api

__all__ = ["api"]

api = mfa_api(lambda request: request.app[MFA], client_of)
