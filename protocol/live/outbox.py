"""One stream client's bounded queue of events, which records what it had to drop, and where.

Publishing never waits: when the queue is full the event is dropped and counted. The count is
handed out as a :class:`Missed` marker at the exact place the gap occurred: before the next
event that found room, or once the queue has drained. So a slow client learns how many events it
lost between the ones it received, and a slow client never slows anybody else.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from protocol.streams import compact_json, frame_prefix
from protocol.timefmt import iso

__all__ = ["Missed", "Outbox", "Stream", "StreamEvent"]


class Stream(StrEnum):
    """The three WebSocket streams of docs/design.md section 7, by path name."""

    FARM_STATUS = "farm-status"
    DEVICE_EVENTS = "device-events"
    SENSOR_DATA = "sensor-data"


@dataclass(slots=True)
class StreamEvent:
    """Something that happened on a farm, as one stream publishes it (treat as read-only)."""

    stream: Stream
    type: str
    farm_id: str
    data: dict[str, Any]
    at: datetime
    device_id: str | None = None
    metric: str | None = None
    _encoded: str | None = field(default=None, repr=False, compare=False)
    _item: str | None = field(default=None, repr=False, compare=False)

    def encoded(self) -> str:
        """The message as JSON up to its ``seq``: encoded once, however many clients get it."""
        if self._encoded is None:
            self._encoded = frame_prefix(self.type, self.farm_id, self.data, self.at)
        return self._encoded

    def batch_item(self) -> str:
        """The event as one item of a batch: its data with its timestamp, encoded once."""
        if self._item is None:
            self._item = compact_json({**self.data, "timestamp": iso(self.at)})
        return self._item


@dataclass(frozen=True, slots=True)
class Missed:
    """``count`` events were dropped at this point of the queue."""

    count: int


class Outbox:
    """A bounded queue of events for one client; :meth:`offer` never blocks."""

    def __init__(
        self,
        maxsize: int,
        accept: Callable[[StreamEvent], bool] | None,
        on_close: Callable[[Outbox], None],
    ) -> None:
        if maxsize < 1:
            raise ValueError("an outbox holds at least one event")
        self._maxsize = maxsize
        self._accept = accept
        self._on_close = on_close
        # Missed markers ride in the deque too but are not counted against maxsize, so the bound
        # is at most twice maxsize entries and a full queue can always take a marker.
        self._items: deque[StreamEvent | Missed] = deque()
        self._events = 0
        self._unreported = 0
        self._ready = asyncio.Event()
        self.dropped_total = 0
        """Events dropped for lack of room (or lost upstream) since the outbox was opened."""

    def offer(self, event: StreamEvent) -> bool:
        """Queue ``event`` if the client wants it; False if it had to be dropped."""
        if self._accept is not None and not self._accept(event):
            return True
        if self._events >= self._maxsize:
            self._unreported += 1
            self.dropped_total += 1
            return False
        if self._unreported:
            self._items.append(Missed(self._unreported))
            self._unreported = 0
        self._items.append(event)
        self._events += 1
        self._ready.set()
        return True

    def note_missed(self, count: int) -> None:
        """Record ``count`` events lost before they reached this outbox (upstream drops)."""
        if count > 0:
            self._unreported += count
            self.dropped_total += count
            self._ready.set()

    def pending(self) -> int:
        """Events waiting to be sent."""
        return self._events

    def get_nowait(self) -> StreamEvent | Missed | None:
        """The next event or gap marker, or None when nothing is waiting."""
        if self._items:
            item = self._items.popleft()
            if isinstance(item, StreamEvent):
                self._events -= 1
            return item
        if self._unreported:
            # Drops happen only while the queue is full, so once it has drained the gap lies
            # after everything already handed out: report it now rather than with the next event.
            missed, self._unreported = Missed(self._unreported), 0
            return missed
        return None

    async def wait(self) -> None:
        """Return once an event or a gap marker is waiting; takes nothing, so safe to time out."""
        while not self._items and not self._unreported:
            self._ready.clear()
            await self._ready.wait()

    async def get(self) -> StreamEvent | Missed:
        """The next event or gap marker, waiting for one."""
        while True:
            await self.wait()
            item = self.get_nowait()
            if item is not None:
                return item

    def close(self) -> None:
        """Stop receiving events."""
        self._on_close(self)
