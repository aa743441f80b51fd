"""The live streams' feed between cloud processes: NOTIFY on ``farm_live`` after a batch, the
rows that carry what a notification cannot, and the listening connection (system path).

PostgreSQL delivers a NOTIFY sent inside a transaction only when that transaction commits, and
never if it rolls back (docs: SQL command NOTIFY), which is exactly "after the batch commits".
A payload must be shorter than 8000 bytes in the default configuration; a larger one is kept in
``live_feed`` and the notification carries its id. While no stream client is open on any process,
a batch's events are neither encoded nor kept: its row and notification carry their counts only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from cloud.store.db import Connection
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait

__all__ = [
    "APPLICATION_NAME",
    "CHANNEL",
    "FeedListener",
    "announce",
    "body_of",
    "unseen_since",
]

log = logging.getLogger(__name__)

CHANNEL = "farm_live"
APPLICATION_NAME = "farm-cloud live feed"
"""How the listening connection shows in pg_stat_activity."""
MAX_INLINE_BYTES = 7900
"""Payloads up to this size ride in the notification (PostgreSQL's limit is 8000 bytes)."""
_KEEP = "1 hour"
_LOSS_MARGIN = timedelta(seconds=5)


async def announce(
    conn: Connection,
    events: list[dict[str, Any]],
    counts: Mapping[str, int],
    *,
    listened: bool = True,
) -> None:
    """Announce ``events`` (``counts`` of them per stream) to every process once ``conn``'s
    transaction commits.

    Unless ``listened`` (no stream client was open on any process), only the counts are kept
    and announced, as when the events are too large for the notification and pruned before a
    process reads them: a process with a client by the time the notification comes tells it
    that many were missed, and one that was not listening counts them on reconnecting. A
    backlog batch's events are then neither encoded nor stored."""
    if not events:
        return
    body = json.dumps(events, separators=(",", ":")) if listened else None
    inline = body is not None and len(body.encode()) + 40 <= MAX_INLINE_BYTES
    tail = f',"events":{body}' if inline else f',"counts":{json.dumps(dict(counts))}'
    # One round trip: the row (the body as the text just encoded, 0099), its notification, and
    # the pruning of rows past keeping.
    await conn.execute(
        f"""
        WITH feed AS (
            INSERT INTO live_feed (counts, body) VALUES ($1, $2) RETURNING id
        ), pruned AS (
            DELETE FROM live_feed WHERE created_at < now() - interval '{_KEEP}'
        )
        SELECT pg_notify($3, '{{"id":' || feed.id || $4 || '}}') FROM feed
        """,
        dict(counts),
        None if inline else body,
        CHANNEL,
        tail,
    )


async def body_of(conn: Connection, feed_id: int) -> list[dict[str, Any]] | None:
    """The events kept for a notification too large to carry them (None once pruned)."""
    body: str | None = await conn.fetchval("SELECT body FROM live_feed WHERE id = $1", feed_id)
    if body is None:
        return None
    events: list[dict[str, Any]] = json.loads(body)
    return events


async def unseen_since(conn: Connection, since: datetime, seen: Iterable[int]) -> Counter[str]:
    """Events per stream announced since ``since`` by notifications not among ``seen``."""
    rows = await conn.fetch(
        "SELECT counts FROM live_feed WHERE created_at >= $1 AND NOT id = ANY($2::bigint[])",
        since,
        list(seen),
    )
    total: Counter[str] = Counter()
    for row in rows:
        total.update({str(k): int(v) for k, v in row["counts"].items()})
    return total


Handler = Callable[[str], None]
"""Called on the event loop with each notification's payload; must not block."""
Reconnected = Callable[[datetime], Awaitable[None]]
"""Called after the listening connection was re-opened, with when it was lost."""


class FeedListener:
    """One connection that LISTENs on ``farm_live``, re-opened with back-off when it fails."""

    def __init__(
        self,
        dsn: str,
        on_payload: Handler,
        on_reconnect: Reconnected,
        *,
        io_timeout: float,
        check_s: float = 5.0,
    ) -> None:
        self._dsn = dsn
        self._on_payload = on_payload
        self._on_reconnect = on_reconnect
        self._io_timeout = io_timeout
        self._check_s = check_s
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()

    def start(self) -> None:
        """Start listening in an owned task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="live-feed-listener")

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def _deliver(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self._on_payload(str(payload))

    async def _run(self) -> None:
        retry = Retry(Backoff(0.2, 10.0))
        lost_at: datetime | None = None
        while True:
            conn: asyncpg.Connection[asyncpg.Record] | None = None
            try:
                conn = await asyncpg.connect(
                    self._dsn,
                    timeout=self._io_timeout,
                    server_settings={"application_name": APPLICATION_NAME},
                )
                await conn.add_listener(CHANNEL, self._deliver)
                if lost_at is not None:
                    await self._on_reconnect(lost_at)
                    log.info("live feed listening again")
                lost_at = None
                retry.reset()
                self.listening.set()
                # asyncpg tells of a lost connection only when it is used: check now and then.
                while True:
                    await asyncio.sleep(self._check_s)
                    await conn.fetchval("SELECT 1", timeout=self._io_timeout)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.listening.clear()
                if lost_at is None:
                    # The margin keeps a notification in flight at that moment among those
                    # counted; notifications heard are told apart by their ids.
                    lost_at = datetime.now(UTC) - _LOSS_MARGIN
                delay = retry.next_delay()
                log.warning("live feed connection lost; retrying in %.1f s", delay, exc_info=True)
                await asyncio.sleep(delay)
            finally:
                if conn is not None and not conn.is_closed():
                    conn.terminate()
