"""Fixtures of the cloud's webhook tests: the API tests' cloud and world, a verifying receiver,
and events written as sync apply writes them (the system role)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest

from tests.cloud.api.conftest import (
    Cloud,
    Conn,
    World,
    cloud,
    make_cloud,
    password_hash,
    system,
    world,
)
from tests.support.webhook_receiver import WebhookReceiver

__all__ = [
    "FAST",
    "Cloud",
    "World",
    "add_webhook",
    "cloud",
    "insert_events",
    "make_cloud",
    "password_hash",
    "receiver",
    "system",
    "world",
]

# The receivers of these tests listen on 127.0.0.1: the operator's setting lets the cloud reach
# them (its default refuses loopback, see test_ssrf.py). Retries at a test's scale.
FAST = {
    "webhook_allow_private_targets": True,
    "webhook_poll_s": 0.05,
    "webhook_retry_initial_s": 0.05,
    "webhook_retry_max_s": 0.2,
}


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    """A receiver on a free port (its secret is set once a webhook is created)."""
    hook = WebhookReceiver()
    await hook.start()
    yield hook
    await hook.stop()


def auth(token: str) -> dict[str, str]:
    """A bearer header."""
    return {"Authorization": f"Bearer {token}"}


async def add_webhook(
    cloud: Cloud,
    token: str,
    farm_id: UUID,
    receiver: WebhookReceiver,
    event_types: list[str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """POST /webhooks for ``receiver``; the receiver learns the secret shown once."""
    body = {
        "farm_id": str(farm_id),
        "url": receiver.url,
        "event_types": event_types or ["alert.raised"],
        **fields,
    }
    resp = await cloud.client.post("/api/v1/webhooks", json=body, headers=auth(token))
    assert resp.status == 201, await resp.text()
    created: dict[str, Any] = await resp.json()
    receiver.secret = created["secret"]
    return created


async def insert_events(
    system: Conn, farm_id: UUID, count: int, kind: str = "alert_raised"
) -> list[UUID]:
    """``count`` events of ``kind`` in one transaction, as sync apply writes an agent's."""
    rows = await system.fetch(
        "INSERT INTO events (farm_id, kind, severity, message, data, ts)"
        " SELECT $1, $2, 'critical', 'temperature ' || n || ' above 30', $3::jsonb, now()"
        " FROM generate_series(1, $4) AS n RETURNING id",
        farm_id,
        kind,
        json.dumps({"metric": "temperature", "threshold": 30.0}),
        count,
    )
    return [row["id"] for row in rows]
