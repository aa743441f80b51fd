"""Middlewares every service installs: request ids, the error envelope, authentication."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware

from farmkit.logs import REQUEST_ID as REQUEST_ID_VAR
from protocol.errors import (
    ApiError,
    BadRequest,
    InternalError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    envelope,
)
from protocol.http.keys import AUTH_FAILURE, PRINCIPAL, PUBLIC_HANDLERS, REQUEST_ID
from protocol.identity import Principal

__all__ = [
    "auth_middleware",
    "error_middleware",
    "error_response",
    "request_id_middleware",
]

log = logging.getLogger(__name__)
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

Authenticate = Callable[[web.Request], Awaitable[Principal | None]]


def error_response(error: ApiError, request: web.Request) -> web.Response:
    """Render ``error`` in the envelope."""
    response = web.json_response(envelope(error, request.get(REQUEST_ID, "")), status=error.status)
    if error.status == 405 and "allowed" in error.details:
        response.headers["Allow"] = ",".join(error.details["allowed"])
    if isinstance(error, RateLimited):  # any 429, from the limiter or a service (RFC 9110 10.2.3)
        response.headers["Retry-After"] = str(error.retry_after)
    return response


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Echo a sane client ``X-Request-ID`` or make one, on every response."""
    supplied = request.headers.get("X-Request-ID", "")
    request_id = supplied if _CLIENT_REQUEST_ID.match(supplied) else uuid.uuid4().hex
    request[REQUEST_ID] = request_id
    bound = REQUEST_ID_VAR.set(request_id)  # every log line of this request carries it
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers["X-Request-ID"] = request_id
        raise
    finally:
        REQUEST_ID_VAR.reset(bound)
    response.headers["X-Request-ID"] = request_id
    return response


def _from_http_exception(exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return MethodNotAllowed(details={"allowed": sorted(exc.allowed_methods)})
    if isinstance(exc, web.HTTPNotFound):
        return NotFound("No such endpoint")
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return PayloadTooLarge()
    if exc.status == 400:
        return BadRequest(exc.reason)
    error = ApiError(exc.reason)
    error.status = exc.status  # type: ignore[misc]
    return error


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure, from routing to handlers, into the error envelope.

    A body with a ``Content-Encoding`` is decoded before anything else, so a body its encoding
    cannot decode is a 400 on every route, whether or not the handler reads it.
    """
    try:
        if request.body_exists and "Content-Encoding" in request.headers:
            await request.read()
        return await handler(request)
    except (HttpProcessingError, web.RequestPayloadError):  # the body failed to decode
        response = error_response(BadRequest("Body is not valid for its Content-Encoding"), request)
        response.force_close()  # the rest of the stream cannot be parsed: end the connection
        return response
    except ApiError as err:
        return error_response(err, request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(_from_http_exception(exc), request)
    except Exception as exc:
        if isinstance(exc, ConnectionResetError) and _client_gone(request):
            # The client closed its connection mid-request (half a body, a dropped link): not
            # a fault of ours, and nobody is left to answer. One line, no traceback. A reset
            # from a peer of ours (the database, the cloud) on a live request is an error.
            log.info("client closed the connection during %s %s", request.method, request.path)
            gone = error_response(BadRequest("The connection closed mid-request"), request)
            gone.force_close()
            return gone
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(InternalError(), request)


def _client_gone(request: web.Request) -> bool:
    """Whether the connection the request came on is closed or closing."""
    transport = request.transport
    return transport is None or transport.is_closing()


def auth_middleware(authenticate: Authenticate) -> Middleware:
    """Resolve the caller (or ``None``) before the handler; invalid credentials are a 401.

    The 401 is raised by the endpoint (``protocol.http.endpoints``) once the rate limiter has
    counted the request like an anonymous one, so guessed API keys and tokens spend the
    address's budget and get the X-RateLimit-* headers. On an endpoint that needs no caller
    (login, refresh, reset...), invalid credentials are ignored: a client holding an expired
    access token must still be able to refresh it.
    """

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            request[PRINCIPAL] = await authenticate(request)
        except ApiError as err:
            if err.status != 401:
                raise
            request[PRINCIPAL] = None
            if request.match_info.handler not in request.app.get(PUBLIC_HANDLERS, set()):
                request[AUTH_FAILURE] = err
        return await handler(request)

    return middleware
