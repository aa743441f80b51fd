"""``/metrics`` in the Prometheus text format (prometheus_client), for the agent and the cloud.

One registry per application (no process-wide singleton). HTTP requests are counted by route
template, method and status, with a latency histogram, by the outermost middleware, so error
responses count with their real status. ``/metrics`` itself is answered by that middleware
before rate limiting and authentication: Prometheus scrapes without a user token and often,
so access is a bearer token or an address in the allow-list instead.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from protocol.errors import ApiError

__all__ = ["MetricsAccess", "install_metrics", "parse_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_PATH = "/metrics"


@dataclass(frozen=True)
class MetricsAccess:
    """Who may read /metrics: a bearer token from anywhere, or any caller in ``networks``."""

    token: str | None
    networks: tuple[Network, ...]

    def allows(self, request: web.Request) -> bool:
        """Whether ``request`` may read the metrics."""
        header = request.headers.get("Authorization", "")
        if self.token and header.startswith("Bearer "):
            return hmac.compare_digest(header[7:].encode(), self.token.encode())
        try:
            address = ipaddress.ip_address(request.remote or "")
        except ValueError:
            return False
        return any(address in network for network in self.networks)


def parse_networks(text: str) -> tuple[Network, ...]:
    """``"127.0.0.1/32, 10.0.0.0/8"`` as networks; a bad entry raises ValueError."""
    return tuple(ipaddress.ip_network(part.strip()) for part in text.split(",") if part.strip())


def install_metrics(
    app: web.Application,
    access: MetricsAccess,
    prefix: str,
    collectors: Sequence[Collector] = (),
    refresh: Callable[[], Awaitable[None]] | None = None,
) -> CollectorRegistry:
    """Serve /metrics on ``app`` and count its HTTP requests; ``refresh`` runs before each
    scrape (figures that need I/O), ``collectors`` add the application's own figures."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    for collector in collectors:
        registry.register(collector)
    requests = Counter(
        f"{prefix}_http_requests",
        "HTTP requests by route, method and status",
        ["route", "method", "status"],
        registry=registry,
    )
    latency = Histogram(
        f"{prefix}_http_request_duration_seconds",
        "HTTP request latency by route and method",
        ["route", "method"],
        registry=registry,
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    )

    children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    async def scrape(request: web.Request) -> web.Response:
        if not access.allows(request):
            return web.json_response(
                {"success": False, "error": {"code": "FORBIDDEN", "message": "Not allowed"}},
                status=403,
            )
        if refresh is not None:
            await refresh()
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path == _PATH and request.method == "GET":
            return await scrape(request)
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except (web.HTTPException, ApiError) as exc:
            status = exc.status  # rendered into a response by the error middleware
            raise
        finally:
            info = request.match_info.route.resource
            route = info.canonical if info is not None else "unmatched"
            if request.match_info.http_exception is not None:
                route = "unmatched"  # never one series per unknown path
            key = (route, request.method, status)
            series = children.get(key)
            if series is None:  # labels() validates and locks: look each series up once
                series = children[key] = (
                    requests.labels(route, request.method, str(status)),
                    latency.labels(route, request.method),
                )
            series[0].inc()
            series[1].observe(time.perf_counter() - started)

    app.middlewares.insert(0, middleware)
    return registry
