"""One signed POST of one delivery, with a time limit, no redirects and the address policy.

Every outcome is an :class:`Attempt`: a 2xx answer is a success, anything else (another
status, a redirect, a refused address, a timeout, a connection failure) is a failure with the
status code or a short reason. Nothing here raises for a receiver's fault, and the secret and
the signature never reach a log or an error text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import aiohttp
from yarl import URL

from integrations.webhooks.signing import signed_headers
from integrations.webhooks.targets import (
    AddressPolicy,
    GuardedResolver,
    TargetRefused,
    literal_refusal,
)

__all__ = ["Attempt", "DueDelivery", "WebhookSender", "open_session"]

_MAX_ERROR = 300


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A delivery to attempt now; ``body`` is the JSON text signed and sent as is."""

    id: str
    webhook_id: str
    url: str
    secret: str
    body: str
    attempts: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one POST came to."""

    ok: bool
    status_code: int | None = None
    error: str | None = None


def open_session(policy: AddressPolicy, *, connections: int) -> aiohttp.ClientSession:
    """The HTTP session every delivery of a process goes through (keep-alive per receiver)."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(policy), limit=connections, ttl_dns_cache=10
    )
    # No cookies kept between receivers' answers; no proxy taken from the environment.
    return aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False
    )


def _short(text: str) -> str:
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."


class WebhookSender:
    """Posts deliveries through one session under one address policy."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        policy: AddressPolicy,
        *,
        timeout_s: float,
        user_agent: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session = session
        self._policy = policy
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._timeout_s = timeout_s
        self._user_agent = user_agent
        self._clock = clock

    async def send(self, delivery: DueDelivery) -> Attempt:
        """POST one delivery; never raises for the receiver's or the network's fault."""
        try:
            url = URL(delivery.url)
        except (ValueError, TypeError):
            return Attempt(False, error="invalid URL")
        refused = literal_refusal(url, self._policy)
        if refused is not None:
            return Attempt(False, error=f"target refused: {refused}")
        body = delivery.body.encode("utf-8")
        headers = signed_headers(delivery.secret, delivery.id, int(self._clock()), body)
        headers["content-type"] = "application/json"
        headers["user-agent"] = self._user_agent
        try:
            async with self._session.post(
                url, data=body, headers=headers, allow_redirects=False, timeout=self._timeout
            ) as resp:
                status = resp.status
        except TimeoutError:
            return Attempt(False, error=f"timed out after {self._timeout_s:g} s")
        except aiohttp.ClientConnectorError as err:
            cause = err.os_error
            if isinstance(cause, TargetRefused):
                return Attempt(False, error=f"target refused: {_short(str(cause))}")
            return Attempt(False, error=_short(f"connection failed: {cause.strerror or cause}"))
        except aiohttp.ClientError as err:
            return Attempt(False, error=_short(f"{type(err).__name__}: {err}"))
        except asyncio.CancelledError:
            raise
        except OSError as err:
            return Attempt(False, error=_short(f"network error: {err}"))
        if 200 <= status < 300:
            return Attempt(True, status_code=status)
        return Attempt(False, status_code=status, error=f"HTTP {status}")
