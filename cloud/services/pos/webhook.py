"""The provider's webhook: verify, store, answer at once; the worker applies events later.

Which configuration an event belongs to is found from its ``merchant_id`` (or a ``config_id``
in the notification URL's query); the signature must verify with that configuration's key over
its notification URL and the raw body (docs/design.md section 9). Nothing is stored otherwise.

The event is stored by one statement outside a transaction; the configurations of a route are
remembered for a few seconds, and that statement re-checks the key and URL of the one that
verified (docs/adr/0045-pos-integration.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg

from cloud.pos_provider.signature import signature_matches
from cloud.services.pos.configs import SIGNATURE_KEY
from cloud.services.pos.secrets import PosSecrets
from cloud.store import pos_configs, pos_webhooks
from cloud.store.db import Connection, Database
from farmkit.secretbox import SecretBoxError
from protocol.errors import BadRequest, Forbidden, Unauthorized
from protocol.schemas.pos import PosWebhookAck

__all__ = ["PosWebhookReceiver"]

log = logging.getLogger(__name__)

ROUTES_TTL_S = 10.0
"""How long the configurations an event may belong to are remembered."""
_MAX_ROUTES = 1000

_Route: TypeAlias = tuple[str | None, UUID | None]


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _holds_nul(document: Any) -> bool:
    """Whether any key or string in the decoded document holds a NUL character (PostgreSQL's
    jsonb cannot store one)."""
    pending = [document]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _event(body: bytes) -> dict[str, Any]:
    """The event object of a body: strict JSON (no NaN or Infinity), no NUL in any string."""
    try:
        event = json.loads(body, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("The body is not JSON") from None
    if not isinstance(event, dict):
        raise BadRequest("The body is not an event object")
    if _holds_nul(event):
        raise BadRequest("The body holds a NUL character")
    return event


class PosWebhookReceiver:
    """Verifies and stores incoming events."""

    def __init__(
        self,
        db: Database,
        secrets: PosSecrets,
        wake: Callable[[], None],
        *,
        routes_ttl_s: float = ROUTES_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._secrets = secrets
        self._wake = wake
        self._ttl_s = routes_ttl_s
        self._clock = clock
        # (merchant id, config id of the URL) -> when read, the configurations found.
        self._routes: dict[_Route, tuple[float, list[asyncpg.Record]]] = {}

    async def receive(
        self, signature: str | None, body: bytes, config_hint: str | None
    ) -> PosWebhookAck:
        """401 without a signature, 403 when it does not verify, 400 for a body that is no
        event; a repeated ``event_id`` is acknowledged and dropped."""
        if not signature:
            raise Unauthorized("Missing x-square-hmacsha256-signature")
        event = _event(body)
        merchant = event.get("merchant_id")
        hint: UUID | None = None
        if config_hint:
            try:
                hint = UUID(config_hint)
            except ValueError:
                raise Forbidden("Signature does not verify") from None
        route = (merchant if isinstance(merchant, str) else None, hint)
        async with self._db.statements_as_system() as conn:
            # The configurations of a route are remembered a few seconds. The statement that
            # stores the event checks that the one that verified still has that key and URL;
            # when remembered ones fail either way, they are read again before a refusal.
            candidates = self._remembered(route)
            fresh = candidates is None
            while True:
                if candidates is None:
                    candidates = await self._look_up(conn, route)
                stored = await self._store(conn, candidates, event, body, signature)
                if stored is not None or fresh:
                    break
                candidates, fresh = None, True
        if stored is None:
            raise Forbidden("Signature does not verify")
        if stored:
            self._wake()
        else:
            log.info("POS webhook: duplicate event %s dropped", event["event_id"])
        return PosWebhookAck(received=True, duplicate=not stored)

    async def _store(
        self,
        conn: Connection,
        candidates: list[asyncpg.Record],
        event: dict[str, Any],
        body: bytes,
        signature: str,
    ) -> bool | None:
        """Store the event for the first candidate it verifies with: whether it was new;
        ``None`` if none verifies (or the one that did changed meanwhile)."""
        config = next((c for c in candidates if self._verifies(c, body, signature)), None)
        if config is None:
            return None
        event_id, event_type = event.get("event_id"), event.get("type")
        if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
            raise BadRequest("An event needs event_id and type")
        return await pos_webhooks.store_event(conn, config, event_id[:200], event_type[:200], event)

    def _remembered(self, route: _Route) -> list[asyncpg.Record] | None:
        entry = self._routes.get(route)
        if entry is None or self._clock() - entry[0] > self._ttl_s:
            return None
        return entry[1]

    async def _look_up(self, conn: Connection, route: _Route) -> list[asyncpg.Record]:
        candidates = await pos_configs.configs_for_webhook(conn, *route)
        if len(self._routes) >= _MAX_ROUTES:
            self._routes.clear()
        if candidates:  # only routes that exist: a stranger's made-up ids are not kept
            self._routes[route] = (self._clock(), candidates)
        else:
            self._routes.pop(route, None)
        return candidates

    def _verifies(self, config: Any, body: bytes, signature: str) -> bool:
        try:
            key = self._secrets.open(config["id"], SIGNATURE_KEY, config["signature_key"])
        except SecretBoxError:
            log.warning("POS configuration %s: signature key does not decrypt", config["id"])
            return False
        return signature_matches(key, config["notification_url"], body, signature)
