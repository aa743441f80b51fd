"""Home Assistant: MQTT discovery of the farm's devices, on the devices' broker connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.devices.codec import OutgoingMessage
from agent.devices.mqtt import outgoing
from agent.settings import AgentSettings
from agent.store.devices import DeviceStore
from agent.web.keys import ACTUATORS, DATABASE, DEVICE_RUNTIME, DEVICES, EVENT_FANOUT, READINGS
from agent.wiring.context import CleanupContext
from integrations.home_assistant.agent_side.discovery import HaDiscovery
from integrations.home_assistant.agent_side.discovery_configs import DiscoveryTopics
from protocol.live.outbox import Stream
from protocol.version import distribution_version

__all__ = ["agent_status_messages", "discovery_topics", "hub_context"]

# States waiting to be relayed to Home Assistant; beyond it some are dropped.
_RELAY_QUEUE = 1000
# Committed readings waiting to be folded into the newest value per series (a commit delivers
# up to a few thousand at once); beyond it some are dropped.
_RELAY_READINGS_QUEUE = 10_000


def discovery_topics(settings: AgentSettings) -> DiscoveryTopics:
    """Where the discovery goes and where the advertised entities' topics live."""
    return DiscoveryTopics(settings.ha_discovery_prefix, settings.ha_discovery_base_topic)


def agent_status_messages(
    settings: AgentSettings,
) -> tuple[OutgoingMessage, OutgoingMessage] | tuple[None, None]:
    """The agent's birth and will (retained online/offline), when discovery is on."""
    if not settings.ha_discovery_enabled:
        return None, None
    topic = discovery_topics(settings).agent_status
    return outgoing("status", topic, "online"), outgoing("status", topic, "offline")


def hub_context(settings: AgentSettings) -> CleanupContext:
    """Publish Home Assistant discovery for the application's lifetime, when enabled."""

    async def hub(app: web.Application) -> AsyncIterator[None]:
        runtime = app[DEVICE_RUNTIME]
        if not settings.ha_discovery_enabled or runtime.client is None:
            yield
            return
        devices = DeviceStore(app[DATABASE])

        async def device_name(device_id: str) -> str | None:
            row = await devices.get(device_id)
            return None if row is None else str(row["name"])

        discovery = HaDiscovery(
            runtime,
            runtime.client,
            app[ACTUATORS],
            device_name,
            topics=discovery_topics(settings),
            origin={"name": "farm-agent", "sw_version": distribution_version()},
        )
        registry, events = app[DEVICES], app[EVENT_FANOUT]
        readings = app[READINGS].writer.subscribe(_RELAY_READINGS_QUEUE)
        await discovery.start(
            await registry.bindings(),
            [events.subscribe(Stream.DEVICE_EVENTS, _RELAY_QUEUE)],
            readings,
        )
        registry.add_listener(discovery)
        try:
            yield
        finally:
            await discovery.stop()
            readings.close()

    return hub
