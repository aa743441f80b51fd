"""Fixed-window rate limits with the X-RateLimit-* headers (docs/design.md section 3).

Authenticated callers are counted per user (100 a minute, 1000 for premium); anonymous callers per
address (100 an hour). Windows are fixed and aligned so ``X-RateLimit-Reset`` is a stable epoch.

The counting is a :class:`RateCounter`: the agent counts in its process's memory
(:class:`RateLimiter`); the cloud, which runs as several processes behind a balancer, counts in
PostgreSQL so that N processes do not allow N times the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from protocol.errors import RateLimited
from protocol.http.keys import PRINCIPAL, RATE_LIMIT
from protocol.http.ratelimit_verdict import Verdict
from protocol.identity import Plan, Principal

__all__ = [
    "RateCounter",
    "RateLimitPolicy",
    "RateLimiter",
    "Verdict",
    "add_rate_limit_headers",
    "rate_limit_middleware",
    "verdict_of",
]


@dataclass(frozen=True)
class RateLimitPolicy:
    """Limits per window; a limit of 0 disables that class of limit."""

    per_user: int = 100
    per_premium_user: int = 1000
    user_window_s: int = 60
    per_address: int = 100
    address_window_s: int = 3600
    # Paths whose requests authenticate by other means than a user (an agent's signed sync
    # batches): the anonymous per-address limit would throttle a paired agent within minutes.
    unmetered_paths: frozenset[str] = frozenset()
    # The web app's page and immutable assets: a first visit loads a dozen files, which must
    # not spend the anonymous quota the sign-in needs.
    unmetered_prefixes: tuple[str, ...] = ()


class RateCounter(Protocol):
    """Counts one request for a key in the fixed window of ``window_s`` that holds now."""

    async def hit(self, key: str, limit: int, window_s: int) -> Verdict | None:
        """Count one request for ``key``; the verdict says whether it is within ``limit``.
        ``None`` when the count could not be kept (its store is down): the request is let
        through uncounted and answered without the headers."""
        ...


def verdict_of(count: int, limit: int, window_start: int, window_s: int, now: float) -> Verdict:
    """The verdict for the ``count``-th request in the window starting at ``window_start``."""
    reset_at = window_start + window_s
    retry_after = max(1, math.ceil(reset_at - now))
    return Verdict(count <= limit, limit, max(0, limit - count), reset_at, retry_after)


class RateLimiter:
    """Counts hits per key in fixed windows, in this process's memory (one process only)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._windows: dict[str, tuple[int, int]] = {}

    async def hit(self, key: str, limit: int, window_s: int) -> Verdict:
        """Count one request for ``key``."""
        now = self._clock()
        window_start = int(now // window_s) * window_s
        start, count = self._windows.get(key, (window_start, 0))
        if start != window_start:
            count = 0
            if len(self._windows) > 50_000:
                self._evict(window_start)
        count += 1
        self._windows[key] = (window_start, count)
        return verdict_of(count, limit, window_start, window_s, now)

    def _evict(self, current_start: int) -> None:
        self._windows = {k: v for k, v in self._windows.items() if v[0] >= current_start}


async def _verdict(
    limiter: RateCounter, policy: RateLimitPolicy, request: web.Request
) -> Verdict | None:
    principal: Principal | None = request.get(PRINCIPAL)
    if request.path in policy.unmetered_paths or request.path.startswith(policy.unmetered_prefixes):
        return None
    if principal is not None:
        limit = policy.per_premium_user if principal.plan is Plan.PREMIUM else policy.per_user
        if limit <= 0:
            return None
        return await limiter.hit(f"user:{principal.user_id}", limit, policy.user_window_s)
    if policy.per_address <= 0:
        return None
    return await limiter.hit(f"addr:{request.remote}", policy.per_address, policy.address_window_s)


def rate_limit_middleware(limiter: RateCounter, policy: RateLimitPolicy) -> Middleware:
    """Count each request and refuse with 429 and Retry-After over the limit."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        verdict = await _verdict(limiter, policy, request)
        request[RATE_LIMIT] = verdict
        if verdict is not None and not verdict.allowed:
            raise RateLimited(verdict.retry_after)
        return await handler(request)

    return middleware


async def add_rate_limit_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare`` hook: every response, errors included, carries the headers."""
    verdict: Verdict | None = request.get(RATE_LIMIT)
    if verdict is not None:
        response.headers.update(verdict.headers())
