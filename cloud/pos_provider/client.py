"""A thin client of the provider's v2 API (docs/design.md 9, docs/adr/0045).

Every request carries ``Authorization: Bearer <token>`` and ``Square-Version``, has a time
limit, and is retried on 429 (no Retry-After is sent), 5xx, timeouts and broken connections with
the project's capped, jittered exponential back-off (``farmkit/backoff.py``). A 401 raises
:class:`ProviderAuthError` at once; another 4xx raises :class:`ProviderRequestError`. The token
never appears in an exception or log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp

from cloud.pos_provider.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderErrorItem,
    ProviderRequestError,
    ProviderUnavailable,
)
from cloud.pos_provider.json_spans import decode_object
from cloud.pos_provider.resources import Resource
from farmkit.backoff import Backoff

__all__ = ["SQUARE_VERSION", "Page", "PosClient", "RetryPolicy"]

log = logging.getLogger(__name__)

SQUARE_VERSION = "2025-10-16"
"""The API version every request pins (the ``Square-Version`` header)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long one request may take and how often a transient failure is retried."""

    attempts: int = 6
    initial_s: float = 0.5
    max_s: float = 30.0
    timeout_s: float = 30.0

    @property
    def backoff(self) -> Backoff:
        """The wait before each retry (jittered: many jobs may be refused together)."""
        return Backoff(self.initial_s, self.max_s)


@dataclass(frozen=True)
class Page:
    """One page of a list: its objects, the cursor of the next page (None: the last), and the
    list's JSON text as the provider wrote it (the mirror stores the objects from it without
    encoding them again)."""

    items: list[dict[str, Any]]
    cursor: str | None
    items_text: str = "[]"


@dataclass(frozen=True)
class _Answer:
    """A JSON object answered: decoded, its text, and where each member's value lies in it."""

    body: dict[str, Any]
    text: str
    spans: dict[str, tuple[int, int]]


def _decode(raw: bytes) -> tuple[Any, str, dict[str, tuple[int, int]]]:
    """A body's JSON value (None if it is not JSON), its text, and its members' spans."""
    try:
        text = raw.decode() if raw else "{}"
    except UnicodeDecodeError:  # JSON in UTF-16 or UTF-32, which json.loads also reads
        try:
            text = json.dumps(json.loads(raw))
        except ValueError:
            return None, "", {}
    try:
        value, spans = decode_object(text)
    except ValueError:
        return None, text, {}
    return value, text, spans


class PosClient:
    """Calls one merchant's account through a shared ``aiohttp`` session."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        access_token: str,
        *,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {access_token}",
            "Square-Version": SQUARE_VERSION,
            "Accept": "application/json",
        }
        self._retry = retry
        self._sleep = sleep
        self._rng = rng

    async def merchant(self) -> dict[str, Any]:
        """The account's merchant (``GET /v2/merchants/me``)."""
        body = await self.request("GET", "/v2/merchants/me")
        merchant: dict[str, Any] = body.get("merchant") or {}
        return merchant

    async def locations(self) -> list[dict[str, Any]]:
        """Every location of the account (``GET /v2/locations``, not paged)."""
        body = await self.request("GET", "/v2/locations")
        return list(body.get("locations") or [])

    async def page(
        self,
        resource: Resource,
        cursor: str | None = None,
        since: datetime | None = None,
        location_ids: Sequence[str] = (),
    ) -> Page:
        """One page of ``resource`` from ``cursor`` (None: the first)."""
        params, body = resource.request(cursor, since, location_ids)
        answer = await self._call(resource.method, resource.path, params, body)
        items = answer.body.get(resource.key)
        span = answer.spans.get(resource.key)
        if not isinstance(items, list) or span is None:
            items, span = [], None
        next_cursor = answer.body.get("cursor") if resource.paged else None
        return Page(
            items,
            str(next_cursor) if next_cursor else None,
            answer.text[span[0] : span[1]] if span else "[]",
        )

    async def adjust_inventory(
        self, idempotency_key: str, changes: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Apply inventory changes once per key (``POST /v2/inventory/changes/batch-create``);
        a repeated key answers the first outcome without applying again."""
        body = await self.request(
            "POST",
            "/v2/inventory/changes/batch-create",
            body={"idempotency_key": idempotency_key, "changes": changes},
        )
        return list(body.get("counts") or [])

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One call with retries; the decoded JSON object it answered."""
        answer = await self._call(method, path, params, body)
        return answer.body

    async def _call(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        body: dict[str, Any] | None,
    ) -> _Answer:
        """One call with retries; the JSON object it answered."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._once(method, path, params, body)
            except ProviderUnavailable as err:
                if attempt >= self._retry.attempts:
                    raise
                delay = self._retry.backoff.delay(attempt - 1, self._rng)
                log.info(
                    "POS provider %s %s: %s; retry %d in %.2f s",
                    method,
                    path,
                    err.describe(),
                    attempt,
                    delay,
                )
                await self._sleep(delay)

    async def _once(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        body: dict[str, Any] | None,
    ) -> _Answer:
        timeout = aiohttp.ClientTimeout(total=self._retry.timeout_s)
        try:
            async with self._session.request(
                method,
                self._base + path,
                params=params,
                json=body,
                headers=self._headers,
                timeout=timeout,
                allow_redirects=False,
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except TimeoutError:
            raise ProviderUnavailable("the provider did not answer in time") from None
        except aiohttp.ClientError as err:
            raise ProviderUnavailable(f"cannot reach the provider: {type(err).__name__}") from None
        decoded, text, spans = _decode(raw)
        if 200 <= status < 300 and isinstance(decoded, dict):
            return _Answer(decoded, text, spans)
        errors = ProviderErrorItem.parse(decoded)
        message = f"{method} {path} answered {status}"
        if status == 401:
            raise ProviderAuthError(message, status, errors)
        if status == 429 or status >= 500:
            raise ProviderUnavailable(message, status, errors)
        if 200 <= status < 300:
            raise ProviderUnavailable(f"{method} {path}: not a JSON object", status)
        if status >= 400:
            raise ProviderRequestError(message, status, errors)
        raise ProviderError(message, status, errors)  # a redirect: never followed
