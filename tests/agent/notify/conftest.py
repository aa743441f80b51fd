"""Fixtures of the agent's notification tests: an ntfy-compatible receiver, quick retry
settings, and helpers to add contact points and rules and to raise events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from agent.web.keys import EVENT_LOG
from tests.conftest import Agent
from tests.support.ntfy_receiver import NtfyReceiver

# Retries within a test's time: the rules are the production ones at a smaller scale.
FAST = {
    "notify_poll_s": 0.05,
    "notify_retry_initial_s": 0.05,
    "notify_retry_max_s": 0.2,
    "notify_public_url": "http://farm.local:8080",
}


@pytest.fixture
async def ntfy() -> AsyncIterator[NtfyReceiver]:
    """An ntfy-compatible receiver on a free port."""
    receiver = NtfyReceiver()
    await receiver.start()
    yield receiver
    await receiver.stop()


async def add_contact(
    agent: Agent, farm_id: str, url: str, token: str | None = None, **fields: Any
) -> dict[str, Any]:
    """POST /contact-points."""
    body = {"farm_id": farm_id, "name": fields.pop("name", "night shift"), "url": url, **fields}
    resp = await agent.client.post("/api/v1/contact-points", json=body, headers=agent.auth(token))
    assert resp.status == 201, await resp.text()
    created: dict[str, Any] = await resp.json()
    return created


async def add_rule(
    agent: Agent,
    farm_id: str,
    contacts: list[str],
    kinds: list[str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """POST /notification-rules."""
    body = {
        "farm_id": farm_id,
        "event_kinds": kinds or ["alert_raised"],
        "contact_point_ids": contacts,
        **fields,
    }
    resp = await agent.client.post("/api/v1/notification-rules", json=body, headers=agent.auth())
    assert resp.status == 201, await resp.text()
    created: dict[str, Any] = await resp.json()
    return created


async def record_event(
    agent: Agent,
    farm_id: str,
    kind: str = "alert_raised",
    severity: str = "critical",
    message: str = "temperature 35 above 30",
    data: dict[str, Any] | None = None,
    device_id: str | None = None,
) -> str:
    """An event through the event log, as the agent's capabilities record one."""
    log = agent.client.app[EVENT_LOG]
    event_id = log.record(
        farm_id,
        device_id,
        kind,
        severity,
        message,
        data
        if data is not None
        else {"metric": "temperature", "raised_value": 35.0, "threshold": 30.0},
    )
    await log.flush()
    return event_id


async def notifications(agent: Agent, **params: str) -> list[dict[str, Any]]:
    """GET /notifications as the admin."""
    resp = await agent.client.get("/api/v1/notifications", params=params, headers=agent.auth())
    assert resp.status == 200, await resp.text()
    found: list[dict[str, Any]] = (await resp.json())["notifications"]
    return found


async def until(
    probe: Callable[[], Awaitable[Any]], check: Callable[[Any], bool], within: float = 30.0
) -> Any:
    """Call ``probe`` until ``check`` holds for its answer (no fixed sleeps: a short yield
    between calls); the last answer is in the error."""
    last: Any = None
    try:
        async with asyncio.timeout(within):
            # Polls state the database holds; there is no event to wait on.
            while not check(last := await probe()):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"never held; last: {last!r}") from None
    return last
