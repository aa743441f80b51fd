"""Fixtures of the agent's webhook tests: a verifying receiver, and quick retry settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.web.keys import EVENT_LOG
from tests.conftest import Agent
from tests.support.webhook_receiver import WebhookReceiver

# Retries within a test's time: the rules are the production ones at a smaller scale.
FAST = {
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


async def add_webhook(
    agent: Agent,
    farm_id: str,
    receiver: WebhookReceiver,
    event_types: list[str] | None = None,
    token: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """POST /webhooks for ``receiver``; the receiver learns the secret shown once."""
    body = {
        "farm_id": farm_id,
        "url": receiver.url,
        "event_types": event_types or ["alert.raised", "alert.cleared"],
        **fields,
    }
    resp = await agent.client.post("/api/v1/webhooks", json=body, headers=agent.auth(token))
    assert resp.status == 201, await resp.text()
    created: dict[str, Any] = await resp.json()
    receiver.secret = created["secret"]
    return created


async def raise_alert(agent: Agent, farm_id: str, value: float = 35.0) -> str:
    """An ``alert_raised`` event through the event log, as the alert evaluator records one."""
    log = agent.client.app[EVENT_LOG]
    event_id = log.record(
        farm_id,
        None,
        "alert_raised",
        "critical",
        f"temperature {value:g} above 30",
        {"metric": "temperature", "raised_value": value, "threshold": 30.0},
        stream_type="alert",
    )
    await log.flush()
    return event_id


async def deliveries_of(agent: Agent, webhook_id: str, **params: str) -> list[dict[str, Any]]:
    """GET /webhooks/{id}/deliveries as the admin."""
    resp = await agent.client.get(
        f"/api/v1/webhooks/{webhook_id}/deliveries", params=params, headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    found: list[dict[str, Any]] = (await resp.json())["deliveries"]
    return found
