"""The hub integration in the cloud: the shared service (``integrations.home_assistant.service``)
over the cloud's grants, event log and pending closes, as a ``cleanup_ctx`` (opened after the
database)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.settings import CloudSettings
from cloud.web.keys import DATABASE, HOME_AUTOMATION, HUB_STATE_STREAM, STREAMS
from integrations.home_assistant.client import HubClient
from integrations.home_assistant.cloud_side.assignments import PgAssignmentStore
from integrations.home_assistant.cloud_side.closes_store import PgCloseStore
from integrations.home_assistant.cloud_side.service import HubFarmLog
from integrations.home_assistant.service import HomeAutomation
from integrations.home_assistant.settings import check_hub_config
from integrations.home_assistant.state_cache import HubStateCache
from integrations.home_assistant.state_relay import HubLiveState

__all__ = ["home_automation_context"]

log = logging.getLogger(__name__)

#: Closes written by another cloud process are seen within this long (each process wakes at
#: once for its own).
_CLOSE_POLL_S = 5.0


def home_automation_context(
    settings: CloudSettings,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Serve /api/v1/home-automation/* for the application's lifetime (503 while disabled),
    and relay the hub's live state to this process's /ws/device-events clients (each process
    holds its own subscription: its clients are its own)."""

    async def home_automation(app: web.Application) -> AsyncIterator[None]:
        config = settings.hub_config()
        for warning in check_hub_config(config):
            log.warning("%s", warning)
        client = HubClient(config) if config.configured else None
        # Entity lists come from the live state while the hub's event stream is up.
        cache = HubStateCache()
        farm_log = HubFarmLog(app[DATABASE])
        assignments = PgAssignmentStore(app[DATABASE])
        service = HomeAutomation(
            config,
            client,
            farm_log.grant,
            farm_log.record,
            PgCloseStore(app[DATABASE]),
            assignments,
            poll_s=_CLOSE_POLL_S,
            cache=cache,
        )
        app[HOME_AUTOMATION] = service
        if client is not None:
            log.info(
                "home automation: hub %s%s",
                config.url,
                " behind the access proxy" if config.proxy_protected else "",
            )
        service.start()
        live: HubLiveState | None = None
        if client is not None:
            live = HubLiveState(config, app[STREAMS].fanout.publish, assignments.assignments, cache)
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
