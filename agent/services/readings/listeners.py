"""Fan-out of committed readings to listeners (WebSocket streams, the climate loop, sync).

Each listener has its own bounded queue. Delivery never waits: when a listener's queue is full
the reading is dropped for that listener alone and counted, so a slow consumer can neither slow
ingest nor starve the others, and it can tell its own client how much it missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType

from farmkit.throttled_log import ThrottledLog
from protocol.records import record

__all__ = ["CommittedReading", "ListenerSet", "ReadingSubscription"]

log = logging.getLogger(__name__)


@record
class CommittedReading:
    """A reading as stored: committed to disk before any listener sees it."""

    device_id: str
    metric: str
    unit: str
    ts: int
    """Unix milliseconds: the device's time when it sent one, else the receive time."""
    value: float
    """Calibrated value."""
    raw: float | None = None
    """Uncalibrated value, when calibration changed it."""
    received_ts: int | None = None
    """Agent receive time, when it differs from ``ts`` by more than the configured skew."""


class ReadingSubscription:
    """One listener's bounded queue of committed readings."""

    def __init__(
        self,
        maxsize: int,
        accept: Callable[[CommittedReading], bool] | None,
        on_close: Callable[[ReadingSubscription], None],
    ) -> None:
        # A deque and an event, not an asyncio.Queue: every committed reading is offered to
        # every subscription, and a queue's put wakes its getters one call at a time.
        self._items: deque[CommittedReading] = deque()
        self._maxsize = maxsize
        self._arrived = asyncio.Event()
        self._accept = accept
        self._on_close = on_close
        self.dropped = 0
        """Readings dropped because the queue was full, since the last take_dropped()."""
        self.dropped_total = 0

    async def get(self) -> CommittedReading:
        """The next reading, waiting for one."""
        while not self._items:
            self._arrived.clear()
            await self._arrived.wait()
        return self._items.popleft()

    def get_nowait(self) -> CommittedReading | None:
        """The next reading, or None when none is waiting."""
        return self._items.popleft() if self._items else None

    def pending(self) -> int:
        """Readings waiting in the queue."""
        return len(self._items)

    def take_dropped(self) -> int:
        """How many readings were missed since the last call (and reset that count)."""
        dropped, self.dropped = self.dropped, 0
        return dropped

    def offer(self, reading: CommittedReading) -> bool:
        """Queue a reading if the listener wants it; False if it was dropped for lack of room."""
        if self._accept is not None and not self._accept(reading):
            return True
        if len(self._items) >= self._maxsize:
            self.dropped += 1
            self.dropped_total += 1
            return False
        self._items.append(reading)
        self._arrived.set()
        return True

    def close(self) -> None:
        """Stop receiving readings."""
        self._on_close(self)

    def __enter__(self) -> ReadingSubscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ListenerSet:
    """The current subscriptions; delivering to them never blocks."""

    def __init__(self, log_interval: float = 60.0) -> None:
        self._subscriptions: list[ReadingSubscription] = []
        self._problems = ThrottledLog(log, log_interval)
        self.dropped = 0
        """Readings dropped across all listeners, ever."""
        self.filter_errors = 0

    def subscribe(
        self, maxsize: int = 1000, accept: Callable[[CommittedReading], bool] | None = None
    ) -> ReadingSubscription:
        """A new subscription; ``accept`` filters readings before they take queue room."""
        if maxsize < 1:
            raise ValueError("a listener queue holds at least one reading")
        subscription = ReadingSubscription(maxsize, accept, self._remove)
        self._subscriptions.append(subscription)
        return subscription

    def _remove(self, subscription: ReadingSubscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def __len__(self) -> int:
        return len(self._subscriptions)

    def deliver(self, readings: Iterable[CommittedReading]) -> None:
        """Offer every reading to every subscription, dropping where a queue is full."""
        subscriptions = tuple(self._subscriptions)
        if not subscriptions:
            return
        for reading in readings:
            for subscription in subscriptions:
                try:
                    delivered = subscription.offer(reading)
                except Exception:  # a listener's broken filter must not stop the others
                    self.filter_errors += 1
                    self._problems.exception("filter", "reading listener filter failed")
                    continue
                if not delivered:
                    self.dropped += 1
