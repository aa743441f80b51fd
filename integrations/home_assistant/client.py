"""The hub's REST API (Home Assistant), directly or through an access proxy.

Every call has a time limit; redirects are never followed (a proxy that redirects wants a browser
login, and following it would send the token elsewhere). Failures are classified into the
``integrations.home_assistant.errors`` classes: unreachable or timed out, the hub's own 401, a
proxy refusal (redirect, HTML 401/403, the 1010 block), an unknown entity, refused service data.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from integrations.home_assistant.errors import (
    AccessProxyRefused,
    HubBadServiceData,
    HubEntityNotFound,
    HubError,
    HubTimeout,
    HubUnauthorized,
    HubUnreachable,
)
from integrations.home_assistant.settings import HubConfig

__all__ = ["ENTITY_ID", "HubClient", "classify"]

#: A hub entity id: ``<domain>.<object_id>``, lower-case letters, digits and underscores.
ENTITY_ID = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
#: Larger answers are refused: a hub with 10,000 entities answers a few MB.
MAX_ANSWER_BYTES = 32 * 1024 * 1024


async def _body(resp: aiohttp.ClientResponse) -> bytes:
    """The whole answer, refused past MAX_ANSWER_BYTES (one ``read(n)`` of the stream returns
    only what has arrived so far, not ``n`` bytes)."""
    data = bytearray()
    async for chunk in resp.content.iter_chunked(256 * 1024):
        data += chunk
        if len(data) > MAX_ANSWER_BYTES:
            raise HubUnreachable("The hub's answer is too large")
    return bytes(data)


def classify(status: int, content_type: str, body: bytes, *, entity: str | None = None) -> HubError:
    """The error an unsuccessful hub (or proxy) answer stands for."""
    text = body[:2000].decode("utf-8", "replace")
    html = "html" in content_type
    if 300 <= status < 400:
        return AccessProxyRefused(
            "The access proxy redirected to a login page", {"hub_status": status}
        )
    if status == 403 and ("1010" in text and "error code" in text.lower()):
        return AccessProxyRefused(
            "The access proxy blocked the request (error 1010)", {"hub_status": status}
        )
    if status in (401, 403) and html:
        return AccessProxyRefused("The access proxy refused the request", {"hub_status": status})
    if status == 401:
        return HubUnauthorized(details={"hub_status": status})
    if status == 403:
        return AccessProxyRefused(
            "The hub or its proxy refused the request", {"hub_status": status}
        )
    if status == 404 and entity is not None:
        return HubEntityNotFound(details={"entity_id": entity})
    if status == 400:
        return HubBadServiceData(details={"hub_message": _message(text)})
    if status == 504:
        return HubTimeout(details={"hub_status": status})
    return HubUnreachable(f"The hub answered HTTP {status}", {"hub_status": status})


def _message(text: str) -> str:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        return str(parsed["message"])[:200]
    return text.strip()[:200]


class HubClient:
    """One hub, with its token and (optionally) the access proxy's service credentials."""

    def __init__(self, config: HubConfig) -> None:
        if not config.url or not config.token:
            raise ValueError("the hub client needs a URL and a token")
        self.config = config
        self._base = config.url.rstrip("/")
        headers = {"Authorization": f"Bearer {config.token}"}
        if config.proxy_protected:
            headers["CF-Access-Client-Id"] = config.proxy_client_id or ""
            headers["CF-Access-Client-Secret"] = config.proxy_client_secret or ""
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None
        self.last_latency_ms: float | None = None

    async def close(self) -> None:
        """Close the connection pool."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        entity: str | None = None,
    ) -> Any:
        """One API call; the decoded JSON answer, or a classified ``HubError``."""
        started = time.monotonic()
        try:
            async with self._client().request(
                method, self._base + path, json=body, allow_redirects=False
            ) as resp:
                if resp.content_length is not None and resp.content_length > MAX_ANSWER_BYTES:
                    raise HubUnreachable("The hub's answer is too large")
                data = await _body(resp)
                if resp.status != 200 and resp.status != 201:
                    raise classify(resp.status, resp.content_type, data, entity=entity)
                content_type = resp.content_type
        except TimeoutError as err:
            raise HubTimeout() from err
        except aiohttp.ClientError as err:
            raise HubUnreachable(details={"reason": type(err).__name__}) from err
        finally:
            self.last_latency_ms = round((time.monotonic() - started) * 1000, 1)
        if "json" not in content_type:
            # An HTML page with a 200 is a proxy's login form, not the hub.
            if "html" in content_type:
                raise AccessProxyRefused("The access proxy answered with a login page")
            raise HubUnreachable("The hub answered something other than JSON")
        try:
            return json.loads(data)
        except ValueError as err:
            raise HubUnreachable("The hub answered malformed JSON") from err

    async def ping(self) -> str:
        """``GET /api/``: the hub's "API running." message."""
        answer = await self.request("GET", "/api/")
        return str(answer.get("message", "")) if isinstance(answer, dict) else ""

    async def version(self) -> str | None:
        """The hub's version (``GET /api/config``)."""
        answer = await self.request("GET", "/api/config")
        version = answer.get("version") if isinstance(answer, dict) else None
        return str(version) if version is not None else None

    async def states(self) -> list[dict[str, Any]]:
        """Every entity's state (``GET /api/states``)."""
        answer = await self.request("GET", "/api/states")
        if not isinstance(answer, list):
            raise HubUnreachable("The hub's state list is not a list")
        return [item for item in answer if isinstance(item, dict) and "entity_id" in item]

    async def state(self, entity_id: str) -> dict[str, Any]:
        """One entity's state; ``HubEntityNotFound`` when the hub has none."""
        if not ENTITY_ID.match(entity_id):
            raise HubEntityNotFound(details={"entity_id": entity_id})
        answer = await self.request("GET", f"/api/states/{entity_id}", entity=entity_id)
        if not isinstance(answer, dict):
            raise HubUnreachable("The hub's state is not an object")
        return answer

    async def call_service(
        self, domain: str, service: str, data: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """``POST /api/services/<domain>/<service>``: the states that changed."""
        entity = data.get("entity_id")
        answer = await self.request(
            "POST",
            f"/api/services/{domain}/{service}",
            data,
            entity=entity if isinstance(entity, str) else None,
        )
        if not isinstance(answer, list):
            raise HubUnreachable("The hub's service answer is not a list")
        return [item for item in answer if isinstance(item, dict)]
