"""The fake provider's webhook sender: events in the provider's shape, signed as it signs them
(``x-square-hmacsha256-signature`` over notification URL + body) with its delivery headers."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import aiohttp

from cloud.pos_provider.signature import SIGNATURE_HEADER, sign

__all__ = ["send_event", "webhook_event"]

_OBJECT_TYPES = {
    "payment": "payment",
    "refund": "refund",
    "order": "order_updated",
    "customer": "customer",
    "dispute": "dispute",
    "inventory": "inventory_counts",
    "catalog": "catalog_version",
}


def webhook_event(
    merchant_id: str, event_type: str, obj: dict[str, Any], *, deleted: bool = False
) -> dict[str, Any]:
    """An event body: ``{"merchant_id", "type", "event_id", "created_at", "data"}``."""
    family = event_type.split(".", 1)[0]
    data: dict[str, Any] = {
        "type": _OBJECT_TYPES.get(family, family),
        "id": str(obj.get("id", "")),
    }
    if deleted:
        data["deleted"] = True
    else:
        data["object"] = {_OBJECT_TYPES.get(family, family): obj}
    return {
        "merchant_id": merchant_id,
        "type": event_type,
        "event_id": str(uuid.uuid4()),
        "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "data": data,
    }


async def send_event(
    url: str,
    notification_url: str,
    signature_key: str,
    event: dict[str, Any],
    *,
    retry_number: int = 0,
    session: aiohttp.ClientSession | None = None,
) -> int:
    """POST ``event`` to ``url`` signed for ``notification_url``; the status it got."""
    body = json.dumps(event).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(signature_key, notification_url, body),
        "square-environment": "Sandbox",
        "square-initial-delivery-timestamp": event["created_at"],
        "square-retry-number": str(retry_number),
    }
    own = session is None
    client = session or aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
    try:
        async with client.post(url, data=body, headers=headers) as resp:
            await resp.read()
            return resp.status
    finally:
        if own:
            await client.close()
