"""Fixtures of the event log and alert tests: the live-runtime fixtures and event helpers."""

from __future__ import annotations

from typing import Any

from agent.web.keys import EVENT_LOG
from tests.agent.runtime.conftest import broker, farm, live
from tests.conftest import Agent

__all__ = ["broker", "events_of", "farm", "live", "written"]


async def written(agent: Agent) -> None:
    """Wait until the event log has written everything queued so far."""
    await agent.client.app[EVENT_LOG].flush()


async def events_of(
    agent: Agent, token: str | None = None, **params: str
) -> tuple[int, dict[str, Any]]:
    """GET /api/v1/events with ``params``; the status and the body."""
    await written(agent)
    resp = await agent.client.get("/api/v1/events", params=params, headers=agent.auth(token))
    body: dict[str, Any] = await resp.json()
    return resp.status, body
