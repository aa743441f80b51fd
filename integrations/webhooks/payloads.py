"""Bodies of webhook messages built in Python (the triggers build the others in SQL, same shape).

Every body is ``{"type", "timestamp", "data"}``, the payload structure the Standard Webhooks
specification recommends.
"""

from __future__ import annotations

import json
from datetime import datetime

from integrations.webhooks.catalogue import TEST_EVENT
from protocol.timefmt import iso

__all__ = ["test_body"]


def test_body(webhook_id: str, farm_id: str, at: datetime) -> str:
    """The JSON body of a ``webhook.test`` message."""
    payload = {
        "type": TEST_EVENT,
        "timestamp": iso(at),
        "data": {
            "webhook_id": webhook_id,
            "farm_id": farm_id,
            "message": "A test message: the webhook is reachable and its signature verifies.",
        },
    }
    return json.dumps(payload, separators=(",", ":"))
