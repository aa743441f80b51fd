"""Listens to what device ecosystems announce over MQTT and feeds the Found list.

A connection of its own (client id ``<agent>-discovery``), so the devices' connections and
their subscriptions stay as they are. Announcements are decoded by
``agent.devices.announcements``; each candidate's own topics (per its proposed profile) are
then followed too, so the Found list shows the readings heard so far.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from agent.devices.announcements import AnnouncementDecoder
from agent.devices.codec import DeviceCodec
from agent.devices.errors import DeviceUnavailable, PayloadError
from agent.devices.found import Announce, Candidate
from agent.devices.mqtt import InboundMessage, MqttClient, MqttSettings
from agent.devices.profiles import ProfileRegistry

__all__ = ["DiscoveryListener"]

log = logging.getLogger(__name__)


class DiscoveryListener:
    """Subscribes to the announcement topics and announces what they tell."""

    def __init__(
        self, settings: MqttSettings, profiles: ProfileRegistry, announce: Announce
    ) -> None:
        client_id = f"{settings.client_id}-discovery"
        self._announce = announce
        self.decoder = AnnouncementDecoder(profiles, rpc_source=client_id)
        self.client = MqttClient(
            replace(
                settings,
                client_id=client_id,
                will=None,
                birth=None,
                persistent_session=False,
                subscribe_qos=0,
            ),
            self._handle,
        )
        # topic -> (candidate, codec of its proposed profile)
        self._watched: dict[str, tuple[Candidate, DeviceCodec]] = {}

    async def start(self) -> None:
        """Subscribe and connect (in the background)."""
        await self.client.subscribe(self.decoder.subscriptions())
        await self.client.start()

    async def stop(self) -> None:
        """Disconnect."""
        await self.client.stop()

    async def _handle(self, message: InboundMessage) -> None:
        watched = self._watched.get(message.topic)
        if watched is not None:
            await self._reading(message, *watched)
        heard = self.decoder.decode(message.topic, message.payload, message.retain)
        for request in heard.requests:
            try:
                await self.client.publish(request, timeout=5.0)
            except DeviceUnavailable:
                log.debug("discovery request to %s not sent", request.topic)
        for candidate in heard.candidates:
            await self._offer(candidate)

    async def _offer(self, candidate: Candidate) -> None:
        try:
            listed = await self._announce(candidate)
        except ValueError as err:
            log.warning("found %s device %s not listed: %s", candidate.source, candidate.key, err)
            return
        codec = self.decoder.watch(candidate)
        if codec is None:
            return
        if listed is None:
            # Ignored or added: its readings are no longer wanted here (the registered
            # device's own connection stores them).
            gone = [topic for topic in codec.subscriptions() if topic in self._watched]
            for topic in gone:
                del self._watched[topic]
            if gone:
                await self.client.unsubscribe(gone)
            return
        new = [topic for topic in codec.subscriptions() if topic not in self._watched]
        for topic in codec.subscriptions():
            self._watched[topic] = (candidate, codec)
        if new:
            await self.client.subscribe(new)

    async def _reading(
        self, message: InboundMessage, candidate: Candidate, codec: DeviceCodec
    ) -> None:
        try:
            decoded = codec.decode(message.topic, message.payload)
        except PayloadError:
            return
        if not decoded.measurements:
            return
        readings = {m.metric: m.value for m in decoded.measurements}
        await self._offer(replace(candidate, readings=readings))
