"""One HTTP exchange with the API: credentials, timeouts, error envelopes, 401 and 429 handling.

Resources call :meth:`Transport.get`, :meth:`Transport.send` and :meth:`Transport.pages`, which
return protocol/schemas models, so adding a resource is a handful of one-line methods.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel

from farm_client.credentials import Credentials
from farm_client.errors import FarmApiError, FarmConnectionError

__all__ = ["Params", "RetryPolicy", "Transport"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
Params = Mapping[str, str | int | float | bool | datetime | None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a 429 is honoured: wait Retry-After, at most ``max_retries`` times, each wait capped.

    A Retry-After longer than ``max_wait_s`` is not waited for: the 429 is raised at once, so a
    caller never hangs for a minute without knowing why.
    """

    max_retries: int = 3
    max_wait_s: float = 60.0


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: Mapping[str, str]
    data: Any


class Transport:
    """Sends requests to ``base_url`` over an aiohttp session it does not own."""

    def __init__(
        self,
        base_url: str,
        credentials: Credentials | None,
        timeout_s: float,
        retry: RetryPolicy,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.session: aiohttp.ClientSession | None = None
        """Set by the client while it is open."""
        self.credentials = credentials
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.retry = retry

    @property
    def http(self) -> aiohttp.ClientSession:
        """The open session; a clear error when the client is used outside ``async with``."""
        if self.session is None or self.session.closed:
            raise RuntimeError("the client is not open: use `async with FarmClient(...) as client`")
        return self.session

    # What resources use ---------------------------------------------------------------------

    async def get(self, path: str, model: type[M], params: Params | None = None) -> M:
        """GET ``path`` and parse the answer as ``model``."""
        return model.model_validate(await self.call("GET", path, params=params))

    async def send(
        self, method: str, path: str, model: type[M], body: BaseModel | Mapping[str, Any]
    ) -> M:
        """POST or PUT ``body`` and parse the answer as ``model``."""
        return model.model_validate(await self.call(method, path, body=body))

    async def delete(self, path: str) -> None:
        """DELETE ``path`` (204)."""
        await self.call("DELETE", path)

    async def pages(
        self,
        path: str,
        model: type[M],
        field: str,
        params: Params | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[Any]:
        """Every item of a paged list (docs/design.md 3: ``{field, total, limit, offset}``)."""
        offset = 0
        while True:
            page = await self.get(
                path, model, {**(params or {}), "limit": page_size, "offset": offset}
            )
            items: list[Any] = getattr(page, field)
            for item in items:
                yield item
            offset += len(items)
            total: int = getattr(page, "total")  # noqa: B009 - M is any list model
            if not items or offset >= total:
                return

    # The exchange ---------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: BaseModel | Mapping[str, Any] | None = None,
    ) -> Any:
        """One request with credentials; renews them once after a 401, honours 429."""
        renewed = False
        retries = 0
        while True:
            headers = await self.credentials.headers(self) if self.credentials is not None else {}
            answer = await self._exchange(method, path, params, body, headers)
            if answer.status == 401 and not renewed and self.credentials is not None:
                renewed = True
                if await self.credentials.renew(self, headers):
                    continue
            if answer.status == 429 and retries < self.retry.max_retries:
                wait = _retry_after(answer.headers)
                if wait is not None and wait <= self.retry.max_wait_s:
                    retries += 1
                    log.info("rate limited on %s %s: retrying in %.1f s", method, path, wait)
                    await asyncio.sleep(wait)
                    continue
            if answer.status >= 400:
                raise _error_of(answer)
            return answer.data

    async def post_anonymous(self, path: str, body: dict[str, Any]) -> Any:
        """POST without credentials (login, refresh); FarmApiError on an error answer."""
        answer = await self._exchange("POST", path, None, body, {})
        if answer.status >= 400:
            raise _error_of(answer)
        return answer.data

    async def _exchange(
        self,
        method: str,
        path: str,
        params: Params | None,
        body: BaseModel | Mapping[str, Any] | None,
        headers: dict[str, str],
    ) -> _Answer:
        payload = (
            body.model_dump(mode="json", exclude_unset=True)
            if isinstance(body, BaseModel)
            else body
        )
        query = None if params is None else _query(params)
        try:
            async with self.http.request(
                method,
                self.base_url + path,
                params=query,
                json=payload,
                headers=headers,
                timeout=self.timeout,
            ) as resp:
                raw = await resp.read()
                return _Answer(resp.status, resp.headers, _decode(raw))
        except TimeoutError as err:
            raise FarmConnectionError(f"{method} {path}: no answer in time") from err
        except aiohttp.ClientError as err:
            raise FarmConnectionError(f"{method} {path}: {err}") from err


def _query(params: Params) -> dict[str, str]:
    """Query parameters as strings; None means "not given", booleans as the API spells them."""
    out = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[key] = value.isoformat()
        else:
            out[key] = str(value)
    return out


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds (RFC 9110 section 10.2.3); the HTTP-date form is not used here."""
    value = headers.get("Retry-After")
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _error_of(answer: _Answer) -> FarmApiError:
    """The error envelope (docs/design.md 3) as an exception; any other body as its text."""
    request_id = answer.headers.get("X-Request-ID")
    data = answer.data
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        details = error.get("details")
        return FarmApiError(
            answer.status,
            str(error.get("code", f"HTTP_{answer.status}")),
            str(error.get("message", "")),
            details if isinstance(details, dict) else {},
            str(data.get("request_id") or request_id or "") or None,
        )
    text = data if isinstance(data, str) else json.dumps(data)
    return FarmApiError(answer.status, f"HTTP_{answer.status}", text[:500], {}, request_id)
