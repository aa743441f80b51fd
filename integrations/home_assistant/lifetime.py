"""The integration's lifetime, the same in the agent and the cloud: the hub client when configured,
the shared service over the side's grants, event log, close store and assignments, and the relay of
the hub's live state into the side's stream fan-out; each side wires it as a ``cleanup_ctx``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from integrations.home_assistant.client import HubClient
from integrations.home_assistant.closes import CloseStore
from integrations.home_assistant.live import HubStateStream
from integrations.home_assistant.ownership import AssignmentStore
from integrations.home_assistant.service import EventRecorder, FarmGrant, HomeAutomation
from integrations.home_assistant.settings import HubConfig, check_hub_config
from integrations.home_assistant.state_cache import HubStateCache
from integrations.home_assistant.state_relay import HubLiveState
from protocol.live.outbox import StreamEvent

__all__ = ["RunningHub", "running_home_automation"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunningHub:
    """The running integration: its service, and the hub's live stream while a client exists."""

    service: HomeAutomation
    stream: HubStateStream | None


@asynccontextmanager
async def running_home_automation(
    config: HubConfig,
    grant: FarmGrant,
    record: EventRecorder,
    closes: CloseStore,
    assignments: AssignmentStore,
    publish: Callable[[StreamEvent], None],
    **service_options: Any,
) -> AsyncIterator[RunningHub]:
    """Start the integration (closes promised before a restart run now, overdue ones at once) and
    stop it on exit; ``service_options`` go to :class:`HomeAutomation` (``poll_s``)."""
    for warning in check_hub_config(config):
        log.warning("%s", warning)
    client = HubClient(config) if config.configured else None
    # Entity lists come from the live state while the hub's event stream is up.
    cache = HubStateCache()
    service = HomeAutomation(
        config, client, grant, record, closes, assignments, cache=cache, **service_options
    )
    service.start()
    live: HubLiveState | None = None
    if client is not None:
        log.info(
            "home automation: hub %s%s",
            config.url,
            " behind the access proxy" if config.proxy_protected else "",
        )
        # Live state: the hub's state changes reach /ws/device-events without polling.
        live = HubLiveState(config, publish, assignments.assignments, cache)
        live.start()
    try:
        yield RunningHub(service, live.stream if live is not None else None)
    finally:
        if live is not None:
            await live.stop()
        await service.stop()
        if client is not None:
            await client.close()
