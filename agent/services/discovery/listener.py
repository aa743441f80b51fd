"""Listens to what device ecosystems announce over MQTT and feeds the Found list.

A connection of its own (client id ``<agent>-discovery``), so the devices' connections and
their subscriptions stay as they are. Announcements are decoded by
``agent.devices.announcements``; each candidate's own topics (per its proposed profile) are
then followed too, so the Found list shows the readings heard so far.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import replace

from agent.devices.announcements import AnnouncementDecoder
from agent.devices.codec import DeviceCodec
from agent.devices.errors import DeviceUnavailable, PayloadError
from agent.devices.found import Announce, Candidate
from agent.devices.mqtt import InboundMessage, MqttClient, MqttSettings
from agent.devices.profiles import ProfileRegistry
from farmkit.tasks import cancel_and_wait

__all__ = ["DiscoveryListener"]

log = logging.getLogger(__name__)

#: The readings of a candidate are written at most this often (the latest are kept meanwhile).
READINGS_EVERY_S = 2.0


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
        # Readings heard per candidate are written at most every READINGS_EVERY_S (a chatty
        # Zigbee network must not become a write per message): the latest wait here.
        self._pending: dict[tuple[str, str], Candidate] = {}
        self._written: dict[tuple[str, str], float] = {}
        self._flushes: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def start(self) -> None:
        """Subscribe and connect (in the background)."""
        await self.client.subscribe(self.decoder.subscriptions())
        await self.client.start()

    async def stop(self) -> None:
        """Disconnect."""
        await cancel_and_wait(*self._flushes.values())
        self._flushes.clear()
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
        codec = self.decoder.watch(candidate)
        if codec is not None:
            # Followed before it is listed: a person who sees it listed sees its next reading.
            new = [topic for topic in codec.subscriptions() if topic not in self._watched]
            for topic in codec.subscriptions():
                self._watched[topic] = (candidate, codec)
            if new:
                await self.client.subscribe(new)
        try:
            listed = await self._announce(candidate)
        except ValueError as err:
            log.warning("found %s device %s not listed: %s", candidate.source, candidate.key, err)
            listed = None
        if listed is None and codec is not None:
            # Ignored or added: its readings are no longer wanted here (the registered
            # device's own connection stores them).
            gone = [topic for topic in codec.subscriptions() if topic in self._watched]
            for topic in gone:
                del self._watched[topic]
            if gone:
                await self.client.unsubscribe(gone)

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
        key = (candidate.source, candidate.key)
        earlier = self._pending.get(key)
        merged = {**(earlier.readings if earlier is not None else {}), **readings}
        self._pending[key] = replace(candidate, readings=merged)
        wait = self._written.get(key, -math.inf) + READINGS_EVERY_S - time.monotonic()
        if wait <= 0:
            await self._flush(key)
        elif key not in self._flushes:
            self._flushes[key] = asyncio.create_task(self._flush_later(key, wait))

    async def _flush_later(self, key: tuple[str, str], wait: float) -> None:
        await asyncio.sleep(wait)
        del self._flushes[key]
        try:
            await self._flush(key)
        except Exception:  # the next reading tries again; the listener keeps listening
            log.exception("found device %s: readings not written", key)

    async def _flush(self, key: tuple[str, str]) -> None:
        candidate = self._pending.pop(key, None)
        if candidate is not None:
            self._written[key] = time.monotonic()
            await self._offer(candidate)
