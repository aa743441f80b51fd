"""The hub integration: one shared hub client, when enabled and configured."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web

from agent.services.hub.home_automation import HomeAutomation
from agent.settings import AgentSettings
from agent.store.access import farm_grant
from agent.web.keys import DATABASE, EVENT_LOG, HOME_AUTOMATION
from agent.wiring.context import CleanupContext
from home_hub.client import HubClient
from home_hub.settings import check_hub_config
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
        db, events = app[DATABASE], app[EVENT_LOG]

        async def grant(principal: Principal, farm_id: str) -> PermissionType | None:
            return await farm_grant(db, principal, farm_id)

        def record(farm_id: str, kind: str, message: str, data: Mapping[str, Any]) -> str:
            return events.notice(farm_id, kind, data, message=message)

        service = HomeAutomation(config, client, grant, record)
        app[HOME_AUTOMATION] = service
        if client is not None:
            log.info(
                "home automation: hub %s%s",
                config.url,
                " behind the access proxy" if config.proxy_protected else "",
            )
        try:
            yield
        finally:
            await service.timers.stop()
            if client is not None:
                await client.close()

    return home_automation
