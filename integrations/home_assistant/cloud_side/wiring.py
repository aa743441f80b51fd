"""The hub integration in the cloud: the shared service (``integrations.home_assistant.service``)
over the cloud's grants, event log and pending closes, as a ``cleanup_ctx`` (opened after the
database)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.settings import CloudSettings
from cloud.web.keys import DATABASE, HOME_AUTOMATION, HUB_STATE_STREAM, STREAMS
from integrations.home_assistant.cloud_side.assignments import PgAssignmentStore
from integrations.home_assistant.cloud_side.closes_store import PgCloseStore
from integrations.home_assistant.cloud_side.service import HubFarmLog
from integrations.home_assistant.lifetime import running_home_automation

__all__ = ["home_automation_context"]

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
        farm_log = HubFarmLog(app[DATABASE])
        async with running_home_automation(
            settings.hub_config(),
            farm_log.grant,
            farm_log.record,
            PgCloseStore(app[DATABASE]),
            PgAssignmentStore(app[DATABASE]),
            app[STREAMS].fanout.publish,
            poll_s=_CLOSE_POLL_S,
        ) as running:
            app[HOME_AUTOMATION] = running.service
            if running.stream is not None:
                app[HUB_STATE_STREAM] = running.stream
            yield

    return home_automation
