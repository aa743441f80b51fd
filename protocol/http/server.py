"""The HTTP server both services run: aiohttp's, with its protocol-level refusals in the envelope.

aiohttp answers a request it cannot parse (a URL or header line over 8,190 bytes, too many
headers, a ``Content-Encoding`` it cannot decode) before any middleware runs, from
``RequestHandler.handle_error``, in plain text. This runner's request handler renders those
answers in the error envelope like every other error (docs/design.md section 3).

When the application names trusted proxies (``TRUSTED_PROXIES``, protocol/http/forwarded.py),
the runner makes each request with the real client as ``request.remote``, before any
middleware or handler sees it.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import uuid
from typing import Any

import psutil
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from protocol.errors import ApiError, BadRequest, InternalError, envelope
from protocol.http.forwarded import TRUSTED_PROXIES, TrustedProxies

__all__ = [
    "EnvelopeAppRunner",
    "ListenError",
    "listen",
    "served_urls",
]

log = logging.getLogger(__name__)


def protocol_error(status: int, exc: BaseException | None) -> ApiError:
    """The API error standing for aiohttp's refusal of a request it could not parse."""
    if status >= 500:
        return InternalError()
    if isinstance(exc, ContentEncodingError):
        return BadRequest("Unsupported Content-Encoding: send gzip, deflate or no encoding")
    if isinstance(exc, LineTooLong):
        return BadRequest("The URL or a header is too long (8190 bytes at most)")
    # The parser's own message may quote the request's bytes: it goes to the log only.
    error = BadRequest("Malformed HTTP request (too many headers, or not HTTP/1.1)")
    if status != 400:
        error.status = status  # type: ignore[misc]
    return error


class _EnvelopeRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering protocol errors in the envelope."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Render aiohttp's own refusal (parse errors, faults outside the app) as the envelope."""
        if status >= 500:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        else:
            log.info("refused a malformed request from %s: %s", request.remote, message or exc)
        if request.writer.output_size > 0:  # a response has started: it cannot be replaced
            raise ConnectionError("Response is sent already, cannot send an error")
        error = protocol_error(status, exc)
        request_id = uuid.uuid4().hex
        response = web.json_response(envelope(error, request_id), status=error.status)
        response.headers["X-Request-ID"] = request_id
        response.force_close()
        return response


class _EnvelopeServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _EnvelopeRequestHandler(self, loop=self._loop, **self._kwargs)


class EnvelopeAppRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer even unparseable requests in the envelope."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        kwargs: dict[str, Any] = dict(server._kwargs)
        factory = server.request_factory
        proxies = self.app.get(TRUSTED_PROXIES)
        if proxies is not None and proxies.networks:
            factory = _forwarding_factory(factory, proxies)
        return _EnvelopeServer(
            server.request_handler,
            request_factory=factory,
            handler_cancellation=server.handler_cancellation,
            **kwargs,
        )


def _forwarding_factory(factory: Any, proxies: TrustedProxies) -> Any:
    """``factory``, its requests carrying the client the trusted proxies name as ``remote``."""

    def make(*args: Any, **kwargs: Any) -> BaseRequest:
        request: BaseRequest = factory(*args, **kwargs)
        client = proxies.client_of(request.remote, request.headers)
        if client is None or client == request.remote:
            return request
        return request.clone(remote=client)

    return make


class ListenError(Exception):
    """The listening socket could not be opened (port in use, address not on this machine)."""


async def listen(runner: web.AppRunner, host: str, port: int) -> list[str]:
    """Open ``host:port`` for ``runner`` (set up); return the URLs it now really serves."""
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as err:
        raise ListenError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err
    return served_urls(runner.addresses)


def served_urls(addresses: list[Any]) -> list[str]:
    """``http://`` URLs of bound socket addresses; a wildcard lists this machine's addresses."""
    urls: list[str] = []
    for address in addresses:
        host, port = str(address[0]), int(address[1])
        hosts = _local_addresses(ipv6=":" in host) if host in ("0.0.0.0", "::") else [host]
        urls.extend(f"http://[{h}]:{port}/" if ":" in h else f"http://{h}:{port}/" for h in hosts)
    return list(dict.fromkeys(urls))


def _local_addresses(*, ipv6: bool) -> list[str]:
    """This machine's interface addresses (loopback first), link-local ones left out."""
    family = socket.AF_INET6 if ipv6 else socket.AF_INET
    found = [
        entry.address.split("%")[0]
        for entries in psutil.net_if_addrs().values()
        for entry in entries
        if entry.family == family and not entry.address.lower().startswith("fe80")
    ]
    return sorted(found, key=lambda a: (not ipaddress.ip_address(a).is_loopback, a))
