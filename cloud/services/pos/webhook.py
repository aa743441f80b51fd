"""The provider's webhook: verify, store, answer at once; the worker applies events later.

Which configuration an event belongs to is found from its ``merchant_id`` (or a ``config_id``
in the notification URL's query); the signature must verify with that configuration's key over
its notification URL and the raw body (DESIGN.md section 9). Nothing is stored otherwise.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any
from uuid import UUID

from cloud.pos_provider.signature import signature_matches
from cloud.services.pos.configs import SIGNATURE_KEY
from cloud.services.pos.secrets import PosSecrets
from cloud.store import pos_configs, pos_webhooks
from cloud.store.db import Database
from protocol.errors import BadRequest, Forbidden, Unauthorized
from protocol.schemas.pos import PosWebhookAck
from protocol.secretbox import SecretBoxError

__all__ = ["PosWebhookReceiver"]

log = logging.getLogger(__name__)


def _event(body: bytes) -> dict[str, Any]:
    try:
        event = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("The body is not JSON") from None
    if not isinstance(event, dict):
        raise BadRequest("The body is not an event object")
    return event


class PosWebhookReceiver:
    """Verifies and stores incoming events."""

    def __init__(self, db: Database, secrets: PosSecrets, wake: Callable[[], None]) -> None:
        self._db = db
        self._secrets = secrets
        self._wake = wake

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
        async with self._db.as_system() as conn:
            candidates = await pos_configs.configs_for_webhook(
                conn, merchant if isinstance(merchant, str) else None, hint
            )
            config = next((c for c in candidates if self._verifies(c, body, signature)), None)
            if config is None:
                raise Forbidden("Signature does not verify")
            event_id, event_type = event.get("event_id"), event.get("type")
            if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
                raise BadRequest("An event needs event_id and type")
            stored = await pos_webhooks.store_event(
                conn, config["id"], config["owner_id"], event_id[:200], event_type[:200], event
            )
        if stored:
            self._wake()
        else:
            log.info("POS webhook: duplicate event %s dropped", event_id)
        return PosWebhookAck(received=True, duplicate=not stored)

    def _verifies(self, config: Any, body: bytes, signature: str) -> bool:
        try:
            key = self._secrets.open(config["id"], SIGNATURE_KEY, config["signature_key"])
        except SecretBoxError:
            log.warning("POS configuration %s: signature key does not decrypt", config["id"])
            return False
        return signature_matches(key, config["notification_url"], body, signature)
