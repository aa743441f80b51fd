"""Committed readings on their way to /ws/sensor-data, tagged with their device's farm.

One listener of the ReadingWriter serves every sensor-data client: the writer's fan-out stays
one queue long however many clients connect, and each client's own bound lives in its outbox.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from agent.services.live.fanout import EventFanout
from agent.services.readings.listeners import CommittedReading, ReadingSubscription
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait
from protocol.live.outbox import Stream

__all__ = ["ReadingFeed", "ReadingSource"]

log = logging.getLogger(__name__)
# The longest the feed forwards readings before it lets the rest of the agent run.
_SLICE_S = 0.005

FarmOfDevice = Callable[[str], Awaitable[str | None]]
DeviceFarms = Callable[[], Awaitable[Mapping[str, str]]]


class ReadingSource(Protocol):
    """Where committed readings come from (``ReadingWriter``)."""

    def subscribe(
        self, maxsize: int = ..., accept: Callable[[CommittedReading], bool] | None = ...
    ) -> ReadingSubscription:
        """A bounded subscription to committed readings."""
        ...


class ReadingFeed:
    """Moves committed readings from the writer into the fan-out; one owned task."""

    def __init__(
        self,
        source: ReadingSource,
        fanout: EventFanout,
        farm_of_device: FarmOfDevice,
        device_farms: DeviceFarms,
        *,
        queue_size: int = 20_000,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._fanout = fanout
        self._farm_of_device = farm_of_device
        self._device_farms = device_farms
        self._queue_size = queue_size
        self._refresh_s = refresh_s
        self._clock = clock
        # Devices can be moved or deleted through the API; reloading the map every few seconds
        # bounds how long a reading can go to the wrong farm without a query per reading. It is
        # reloaded whole, in one query: re-asking device by device stalled the stream for as
        # many queries as there are devices (measured: ~100-250 ms with 100 devices).
        self._farms: dict[str, str | None] = {}
        self._farms_loaded_at: float | None = None
        self._subscription: ReadingSubscription | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Subscribe to the source and start forwarding."""
        if self._task is not None:
            return
        # Readings nobody streams are not even queued.
        self._subscription = self._source.subscribe(
            self._queue_size, lambda _: self._fanout.subscribers(Stream.SENSOR_DATA) > 0
        )
        self._task = asyncio.create_task(self._run(), name="stream-reading-feed")

    async def stop(self) -> None:
        """Stop forwarding and unsubscribe."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    async def _run(self) -> None:
        assert self._subscription is not None
        subscription = self._subscription
        retry = Retry(Backoff(0.1, 5.0, jitter=False))
        while True:
            try:
                reading = await subscription.get()
                await self._forward(subscription, reading)
                retry.reset()
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = retry.next_delay()
                log.exception("sensor-data feed failed; retrying in %.1f s", delay)
                await asyncio.sleep(delay)

    async def _forward(self, subscription: ReadingSubscription, first: CommittedReading) -> None:
        reading: CommittedReading | None = first
        loop = asyncio.get_running_loop()
        turn_began = loop.time()
        while reading is not None:
            farm_id = await self._farm_of(reading.device_id)
            if farm_id is not None:
                self._fanout.publish_reading(farm_id, reading)
            if loop.time() - turn_began > _SLICE_S:
                # A commit of thousands of readings must not hold the event loop in one go.
                await asyncio.sleep(0)
                turn_began = loop.time()
            reading = subscription.get_nowait()
        # The writer drops only while this queue is full, so the gap follows what was just sent.
        lost = subscription.take_dropped()
        if lost:
            self._fanout.report_missed(Stream.SENSOR_DATA, lost)

    async def _farm_of(self, device_id: str) -> str | None:
        now = self._clock()
        if self._farms_loaded_at is None or now - self._farms_loaded_at >= self._refresh_s:
            self._farms = dict(await self._device_farms())
            self._farms_loaded_at = now
        if device_id not in self._farms:  # registered since the last load, or unknown
            self._farms[device_id] = await self._farm_of_device(device_id)
        return self._farms[device_id]
