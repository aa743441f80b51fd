"""A webhook's health from one batch of verdicts, as both sides record it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from integrations.webhooks.deliverer import Verdict

__all__ = ["fold_health"]


def fold_health(verdicts: Sequence[Verdict]) -> dict[str, tuple[int, int, datetime]]:
    """Per webhook id: deliveries that arrived, deliveries that failed, and the latest attempt."""
    health: dict[str, tuple[int, int, datetime]] = {}
    for v in verdicts:
        ok, failed, at = health.get(v.webhook_id, (0, 0, v.attempted_at))
        if v.status == "delivered":
            ok += 1
        else:
            failed += 1
        health[v.webhook_id] = (ok, failed, max(at, v.attempted_at))
    return health
