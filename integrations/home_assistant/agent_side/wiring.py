"""The hub integration: one shared hub client, when enabled and configured."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web

from agent.settings import AgentSettings
from agent.store.access import farm_grant
from agent.web.keys import DATABASE, EVENT_FANOUT, EVENT_LOG, HOME_AUTOMATION, HUB_STATE_STREAM
from agent.wiring.context import CleanupContext
from integrations.home_assistant.agent_side.assignments import HubAssignmentStore
from integrations.home_assistant.agent_side.closes_store import HubCloseStore
from integrations.home_assistant.client import HubClient
from integrations.home_assistant.service import HomeAutomation
from integrations.home_assistant.settings import check_hub_config
from integrations.home_assistant.state_cache import HubStateCache
from integrations.home_assistant.state_relay import HubLiveState
from protocol.identity import PermissionType, Principal

__all__ = ["home_automation_context"]

log = logging.getLogger(__name__)


def home_automation_context(settings: AgentSettings) -> CleanupContext:
    """Serve /api/v1/home-automation/* for the application's lifetime (503 while disabled)."""

    async def home_automation(app: web.Application) -> AsyncIterator[None]:
        config = settings.hub_config()
        for warning in check_hub_config(config):
            log.warning("%s", warning)
        client = HubClient(config) if config.configured else None
        # Entity lists come from the live state while the hub's event stream is up.
        cache = HubStateCache()
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

        assignments = HubAssignmentStore(db)
        service = HomeAutomation(
            config, client, grant, record, HubCloseStore(db), assignments, cache=cache
        )
        app[HOME_AUTOMATION] = service
        # Closes promised before a restart run now (overdue ones at once).
        service.start()
        if client is not None:
            log.info(
                "home automation: hub %s%s",
                config.url,
                " behind the access proxy" if config.proxy_protected else "",
            )
        live: HubLiveState | None = None
        if client is not None:
            # Live state: the hub's state changes reach /ws/device-events without polling.
            live = HubLiveState(config, app[EVENT_FANOUT].publish, assignments.assignments, cache)
            live.start()
            app[HUB_STATE_STREAM] = live.stream
        try:
            yield
        finally:
            if live is not None:
                await live.stop()
            await service.stop()
            if client is not None:
                await client.close()

    return home_automation
