"""The hub integration: one shared hub client, when enabled and configured."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web

from agent.settings import AgentSettings
from agent.store.access import farm_grant
from agent.web.keys import DATABASE, EVENT_FANOUT, EVENT_LOG, HOME_AUTOMATION, HUB_STATE_STREAM
from agent.wiring.context import CleanupContext
from integrations.home_assistant.agent_side.assignments import HubAssignmentStore
from integrations.home_assistant.agent_side.closes_store import HubCloseStore
from integrations.home_assistant.lifetime import running_home_automation
from protocol.identity import PermissionType, Principal

__all__ = ["home_automation_context"]


def home_automation_context(settings: AgentSettings) -> CleanupContext:
    """Serve /api/v1/home-automation/* for the application's lifetime (503 while disabled)."""

    async def home_automation(app: web.Application) -> AsyncIterator[None]:
        db, events = app[DATABASE], app[EVENT_LOG]

        async def grant(principal: Principal, farm_id: str) -> PermissionType | None:
            return await farm_grant(db, principal, farm_id)

        async def record(
            farm_id: str,
            kind: str,
            message: str,
            data: Mapping[str, Any],
            *,
            severity: str = "info",
            by: Principal | None = None,
        ) -> str:
            # Who asked is in ``data`` (user_id); the agent's log has no column for it.
            return events.notice(farm_id, kind, data, message=message, severity=severity)

        async with running_home_automation(
            settings.hub_config(),
            grant,
            record,
            HubCloseStore(db),
            HubAssignmentStore(db),
            app[EVENT_FANOUT].publish,
        ) as running:
            app[HOME_AUTOMATION] = running.service
            if running.stream is not None:
                app[HUB_STATE_STREAM] = running.stream
            yield

    return home_automation
