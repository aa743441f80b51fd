"""The farm's event log: what happened, stored and sent live to /ws/farm-status.

Producers (the device runtime's MQTT path, the farm service, the alert evaluator, other
capabilities through :meth:`EventLog.notice`) call :meth:`EventLog.record` on the event loop; it
never waits. Events go to a bounded queue and an owned task writes them in batches, so a burst of
device events costs one transaction, not one fsync each. When the queue is full the event is
dropped and counted (``stats.dropped``): losing a log line beats stalling ingest.

Device ``state`` reports and confirmed commands are not stored: they arrive with every actuator
change (volume) and the device's own state already records them. Availability changes, faults and
commands that timed out or were rejected are stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent.services.live.fanout import DeviceEventLike, FarmStatusChange
from agent.store.events import EventRecord, EventStore
from agent.store.space import SPACE_RETRY, out_of_space
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog
from protocol.live.outbox import Stream, StreamEvent
from protocol.timefmt import iso, utcnow

__all__ = ["EventLog", "EventLogStats"]

log = logging.getLogger(__name__)

_RETRY = Backoff(0.5, 30.0, jitter=False)
_FLUSH_TIMEOUT_S = 10.0


@dataclass
class EventLogStats:
    """Exact counters of the event log."""

    queued: int = 0
    stored: int = 0
    dropped: int = 0
    failed_batches: int = 0
    rejected: int = 0
    """Events the database refused (a constraint): logged and skipped, never retried."""


class EventLog:
    """Queues events, writes them in batches from an owned task, and publishes them live."""

    def __init__(
        self,
        store: EventStore,
        publish: Callable[[StreamEvent], None],
        *,
        max_queue: int = 10_000,
        max_batch: int = 500,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._publish = publish
        self._queue: asyncio.Queue[EventRecord] = asyncio.Queue(max_queue)
        self._max_batch = max_batch
        self._now = now
        self._task: asyncio.Task[None] | None = None
        self._problems = ThrottledLog(log)
        self.stats = EventLogStats()
        self.after_write: list[Callable[[], None]] = []
        """Called once a batch is written (what triggers queued with it is due now)."""

    # Producers ---------------------------------------------------------------------------------

    def record(
        self,
        farm_id: str,
        device_id: str | None,
        kind: str,
        severity: str,
        message: str,
        data: Mapping[str, Any],
        *,
        at: datetime | None = None,
        stream_type: str | None = "event",
    ) -> str:
        """Queue an event for storage and, unless ``stream_type`` is None, send it to
        /ws/farm-status as that message type; return the event's id. Never waits."""
        moment = at or self._now()
        event_id = str(uuid.uuid4())
        entry = EventRecord(
            id=event_id,
            farm_id=farm_id,
            device_id=device_id,
            kind=kind,
            severity=severity,
            message=message,
            ts=iso(moment),
            data=dict(data),
        )
        try:
            self._queue.put_nowait(entry)
            self.stats.queued += 1
        except asyncio.QueueFull:
            self.stats.dropped += 1
            self._problems.warning("full", "event log queue full; %s event dropped", kind)
        if stream_type is not None:
            payload = {
                "event_id": event_id,
                "kind": kind,
                "severity": severity,
                "message": message,
                "device_id": device_id,
                **data,
            }
            self._publish(
                StreamEvent(
                    stream=Stream.FARM_STATUS,
                    type=stream_type,
                    farm_id=farm_id,
                    data=payload,
                    at=moment,
                    device_id=device_id,
                )
            )
        return event_id

    def notice(
        self,
        farm_id: str,
        kind: str,
        data: Mapping[str, Any],
        *,
        severity: str = "info",
        message: str = "",
        device_id: str | None = None,
    ) -> str:
        """A notice of another capability (harvest ready, climate fail-safe): stored and sent
        to /ws/farm-status as type ``notice``."""
        return self.record(
            farm_id, device_id, kind, severity, message or kind, data, stream_type="notice"
        )

    def device_event(self, event: DeviceEventLike) -> None:
        """Store the device events worth keeping (the streams already carry all of them)."""
        data = dict(event.data)
        what = data.get("event")
        if what == "availability":
            status = str(data.get("status"))
            offline = status == "offline"
            self.record(
                event.farm_id,
                event.device_id,
                f"device_{status}",
                "warning" if offline else "info",
                f"Device went {status} ({data.get('reason')})",
                data,
                at=event.at,
                stream_type=None,
            )
        elif what == "fault":
            self.record(
                event.farm_id,
                event.device_id,
                "device_fault",
                "error",
                str(data.get("message") or "Device fault"),
                data,
                at=event.at,
                stream_type=None,
            )
        elif what == "command" and data.get("outcome") in ("timed_out", "rejected"):
            self.record(
                event.farm_id,
                event.device_id,
                "command_failed",
                "warning",
                f"Command {data.get('command')}={data.get('value')} {data.get('outcome')}",
                data,
                at=event.at,
                stream_type=None,
            )

    def farm_status(self, change: FarmStatusChange) -> None:
        """Store a farm's status change (not renames; a deleted farm takes its log with it)."""
        data = dict(change.data)
        if data.get("event") != "updated" or data.get("previous_status") == change.status:
            return
        self.record(
            change.farm_id,
            None,
            "farm_status",
            "info",
            f"Farm status {data.get('previous_status')} -> {change.status}",
            {"status": change.status, "previous_status": data.get("previous_status")},
            at=change.at,
            stream_type=None,
        )

    # The writer --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the writer task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-log-writer")

    async def stop(self) -> None:
        """Write what is queued (bounded in time), then stop the writer."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), _FLUSH_TIMEOUT_S)
        if self._queue.qsize():
            log.warning("event log stopped with %d events unwritten", self._queue.qsize())
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def flush(self) -> None:
        """Wait until every event queued so far is written (tests, shutdown)."""
        await self._queue.join()

    async def _run(self) -> None:
        retry = Retry(_RETRY)
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            while True:
                try:
                    self.stats.stored += await self._store.insert_many(batch)
                    retry.reset()
                    break
                except asyncio.CancelledError:
                    raise
                except sqlite3.IntegrityError:
                    # One bad event must not block every later one: write them one by one.
                    await self._insert_each(batch)
                    break
                except Exception as err:
                    self.stats.failed_batches += 1
                    await asyncio.sleep(self._retry_delay(retry, err, len(batch)))
            for hook in self.after_write:
                hook()
            for _ in batch:
                self._queue.task_done()

    def _retry_delay(self, retry: Retry, err: Exception, size: int) -> float:
        """How long to wait before writing a failed batch again: a full storage is tried
        every few seconds at most, so the events are stored soon after room comes back."""
        delay = retry.next_delay()
        if out_of_space(err):
            self._problems.warning(
                "no-room", "event log: %d events wait for room on the storage: %s", size, err
            )
            return min(delay, SPACE_RETRY.maximum)
        log.error("event log: writing %d events failed; retrying", size, exc_info=err)
        return delay

    async def _insert_each(self, batch: list[EventRecord]) -> None:
        for record in batch:
            try:
                self.stats.stored += await self._store.insert_many([record])
            except sqlite3.IntegrityError:
                self.stats.rejected += 1
                log.exception("event log: event %s %s refused; skipped", record.kind, record.id)

    async def purge(self, keep: timedelta, chunk: int = 5000) -> int:
        """Delete events older than ``keep``; return how many went."""
        cutoff = iso(self._now() - keep)
        total = 0
        while True:
            gone = await self._store.delete_before(cutoff, chunk)
            total += gone
            if gone < chunk:
                return total
