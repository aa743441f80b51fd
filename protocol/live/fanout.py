"""The in-process fan-out that carries live farm events to the WebSocket streams (docs/design.md 7).

Producers call :meth:`StreamFanout.publish` from the event loop; it never waits. Each stream client
holds an :class:`~protocol.live.outbox.Outbox` with its own filter and bound, so what one client
does has no effect on producers or on other clients.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from farmkit.throttled_log import ThrottledLog
from protocol.live.outbox import Outbox, Stream, StreamEvent

__all__ = ["FanoutStats", "StreamFanout"]

log = logging.getLogger(__name__)


@dataclass
class FanoutStats:
    """Exact counters of the fan-out."""

    published: int = 0
    dropped: int = 0
    filter_errors: int = 0


class StreamFanout:
    """Fans published events out to the outboxes of the stream they belong to."""

    def __init__(self, log_interval: float = 60.0) -> None:
        self._outboxes: dict[Stream, list[Outbox]] = {stream: [] for stream in Stream}
        self._problems = ThrottledLog(log, log_interval)
        self.stats = FanoutStats()

    def subscribe(
        self,
        stream: Stream,
        maxsize: int,
        accept: Callable[[StreamEvent], bool] | None = None,
    ) -> Outbox:
        """A new outbox for ``stream``; ``accept`` filters events before they take room."""
        outboxes = self._outboxes[stream]
        outbox = Outbox(
            maxsize, accept, lambda box: outboxes.remove(box) if box in outboxes else None
        )
        outboxes.append(outbox)
        return outbox

    def subscribers(self, stream: Stream) -> int:
        """How many outboxes listen to ``stream``."""
        return len(self._outboxes[stream])

    def publish(self, event: StreamEvent) -> None:
        """Offer ``event`` to every outbox of its stream, dropping where one is full."""
        self.stats.published += 1
        for outbox in tuple(self._outboxes[event.stream]):
            try:
                delivered = outbox.offer(event)
            except Exception:  # one client's broken filter must not starve the others
                self.stats.filter_errors += 1
                self._problems.exception("filter", "stream filter failed")
                continue
            if not delivered:
                self.stats.dropped += 1

    def report_missed(self, stream: Stream, count: int) -> None:
        """Tell every client of ``stream`` that ``count`` events were lost before the fan-out."""
        for outbox in tuple(self._outboxes[stream]):
            outbox.note_missed(count)
