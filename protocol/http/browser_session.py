"""The web app's session: the refresh token in an httpOnly cookie, guarded against CSRF.

A browser asks for it with the request header ``X-Session-Cookie: 1`` on login, MFA verify and
refresh. The answer then carries the refresh token only as the ``farm_refresh`` cookie (HttpOnly,
SameSite=Strict, path ``/auth/``), so no script on the page can read it; the body's
``refresh_token`` is empty. A refresh that sends no token in its body uses the cookie, and only
with the double-submit CSRF check: the ``X-CSRF-Token`` header must equal the readable
``farm_csrf`` cookie set beside it, and an ``Origin`` header, when sent, must be the server's own.
Other clients keep the bearer contract unchanged: tokens in the body, no cookies.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from aiohttp import web

from protocol.errors import Forbidden, Unauthorized
from protocol.schemas.auth import LoginResult

__all__ = [
    "COOKIE_HEADER",
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "REFRESH_COOKIE",
    "clear_session_cookies",
    "cookie_refresh_token",
    "session_response",
    "wants_cookie",
]

REFRESH_COOKIE = "farm_refresh"
CSRF_COOKIE = "farm_csrf"
CSRF_HEADER = "X-CSRF-Token"
COOKIE_HEADER = "X-Session-Cookie"
_REFRESH_PATH = "/auth/"
# Browsers cap a cookie's lifetime near 400 days; the server's session TTL is what ends it.
_MAX_AGE_S = 400 * 86400


def wants_cookie(request: web.Request) -> bool:
    """Whether the caller asked for a cookie session (the web app does)."""
    return request.headers.get(COOKIE_HEADER, "") == "1"


def _secure(request: web.Request) -> bool:
    return request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"


def session_response(request: web.Request, result: LoginResult) -> web.Response:
    """``result`` as JSON without its refresh token, which goes into the httpOnly cookie."""
    body = result.model_copy(update={"refresh_token": ""})
    response = web.Response(body=body.model_dump_json().encode(), content_type="application/json")
    secure = _secure(request)
    response.set_cookie(
        REFRESH_COOKIE,
        result.refresh_token,
        path=_REFRESH_PATH,
        max_age=_MAX_AGE_S,
        httponly=True,
        samesite="Strict",
        secure=secure,
    )
    response.set_cookie(
        CSRF_COOKIE,
        secrets.token_urlsafe(24),
        path="/",
        max_age=_MAX_AGE_S,
        samesite="Strict",
        secure=secure,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def clear_session_cookies(response: web.StreamResponse) -> None:
    """Make the browser forget the session cookies."""
    response.del_cookie(REFRESH_COOKIE, path=_REFRESH_PATH)
    response.del_cookie(CSRF_COOKIE, path="/")


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # same-origin fetches of some browsers omit it; SameSite=Strict still holds
    parts = urlsplit(origin)
    return parts.netloc == request.host


def cookie_refresh_token(request: web.Request) -> str:
    """The refresh token from the cookie, after the CSRF checks; 401 without a cookie."""
    token = request.cookies.get(REFRESH_COOKIE, "")
    if not token:
        raise Unauthorized("Not signed in: no refresh token sent and no session cookie")
    csrf = request.cookies.get(CSRF_COOKIE, "")
    header = request.headers.get(CSRF_HEADER, "")
    if not csrf or not hmac.compare_digest(csrf.encode(), header.encode()):
        raise Forbidden(f"The session cookie needs the {CSRF_HEADER} header")
    if not _same_origin(request):
        raise Forbidden("The session cookie is accepted only from this server's own pages")
    return token
