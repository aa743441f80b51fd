"""Committed batches to this process's stream clients: notifications from every process's sync
apply (cloud/store/live_feed.py), decoded and published into the fan-out in the order they came.

Nothing is lost without being counted: a notification that finds the queue full, one whose kept
events were pruned before this process could read them (or never kept: no stream client was open
on any process when its batch was applied), and the notifications of batches that committed while
the listening connection was down are all told to the clients of each stream as ``missed`` with
their exact event count.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter, deque
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cloud.services.streams.batch import decode_events, missed_by_stream
from cloud.store import live_feed
from cloud.store.db import Database
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog
from protocol.live.fanout import StreamFanout
from protocol.live.outbox import Stream

__all__ = ["CloudFeed"]

log = logging.getLogger(__name__)


class CloudFeed:
    """Publishes the notifications of committed batches into ``fanout``; one owned task."""

    def __init__(
        self,
        db: Database,
        fanout: StreamFanout,
        *,
        queue_size: int = 10_000,
        remembered: int = 10_000,
    ) -> None:
        self._db = db
        self._fanout = fanout
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(queue_size)
        self._seen: deque[int] = deque(maxlen=remembered)
        self._task: asyncio.Task[None] | None = None
        self._problems = ThrottledLog(log)
        self.published = 0

    def start(self) -> None:
        """Start publishing in an owned task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="live-feed")

    async def stop(self) -> None:
        """Stop publishing."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def on_payload(self, payload: str) -> None:
        """One notification (called on the event loop; never waits)."""
        try:
            note = json.loads(payload)
            self._seen.append(int(note["id"]))
        except (ValueError, KeyError, TypeError):
            self._problems.warning("payload", "live feed: malformed notification ignored")
            return
        try:
            self._queue.put_nowait(note)
        except asyncio.QueueFull:
            self._problems.warning("full", "live feed: queue full; a batch's events are missed")
            self._report(_counts(note))

    async def on_reconnect(self, lost_at: datetime) -> None:
        """Count what committed while this process was not listening."""
        async with self._db.as_system() as conn:
            missed = await live_feed.unseen_since(conn, lost_at, self._seen)
        if missed:
            log.warning("live feed: %d events missed while not listening", sum(missed.values()))
            self._report(missed)

    def _report(self, counts: Mapping[str, int]) -> None:
        for name, count in counts.items():
            self._fanout.report_missed(Stream(name), count)

    async def _run(self) -> None:
        retry = Retry(Backoff(0.1, 5.0, jitter=False))
        while True:
            note = await self._queue.get()
            while True:
                try:
                    await self._publish(note)
                    retry.reset()
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:
                    delay = retry.next_delay()
                    log.exception("live feed: publishing failed; retrying in %.1f s", delay)
                    await asyncio.sleep(delay)

    def _wanted(self, note: Mapping[str, Any]) -> bool:
        """Whether a client of this process listens to a stream the notification carries
        (one that cannot be told is decoded, and its malformed events counted as such)."""
        try:
            streams = [Stream(name) for name in _counts(note)]
        except (KeyError, TypeError, ValueError):
            return True
        return any(self._fanout.subscribers(stream) for stream in streams)

    async def _publish(self, note: dict[str, Any]) -> None:
        if not self._wanted(note):
            return  # no client here to tell: the events are not even fetched or decoded
        events = note.get("events")
        if events is None:
            async with self._db.as_system() as conn:
                events = await live_feed.body_of(conn, int(note["id"]))
            if events is None:  # pruned before this process came to it, or never kept
                self._report(_counts(note))
                return
        for wire in events:
            try:
                decoded = decode_events(wire)
            except (KeyError, TypeError, ValueError):
                self._problems.warning("event", "live feed: malformed event ignored")
                continue
            for event in decoded:
                self._fanout.publish(event)
            self.published += len(decoded)


def _counts(note: Mapping[str, Any]) -> Counter[str]:
    events = note.get("events")
    if isinstance(events, list):
        return Counter({s.value: n for s, n in missed_by_stream(events).items()})
    return Counter({str(k): int(v) for k, v in dict(note.get("counts") or {}).items()})
