"""The uploader (docs/design.md section 8): a supervised task that drains the outbox to the cloud in
signed batches, deletes what the cloud committed, applies the identity delta of each answer,
and retries forever with jittered exponential back-off.

No batch can block the queue: a batch is cut to the cloud's announced limits as measured on the
wire (its JSON and its gzip body), and one the cloud still refuses for its size is cut smaller
and sent again, never resent unchanged. Rows posted without a seen answer stay in flight and go
first, unchanged, so a batch the cloud may hold is never sent in another form. While the cloud
is unreachable a cheap probe notices its return within seconds, whatever the back-off.

While a batch of a backlog waits for the cloud's answer the next one is taken, encoded,
compressed and signed (the encoding on a worker thread, off the event loop), so a drain costs
the cloud's time per batch and little of the agent's; its marks and acknowledgements commit
at once. The next batch is only marked in flight, never deleted or acknowledged, before the
answer to the one ahead of it is seen; it is thrown away (its rows stay in flight, or are
released with the rest) whenever that answer is not an ack.

Caught up, at a farm's trickle, it sends what came every ``idle_interval_s``, and each batch
writes twice: its marks and its acknowledgement. On an SD card every commit costs an fsync,
the database's first page and a re-dirtied block at the WAL's tail, so neither commits alone
(ADR 0081): both ride the reading writer's next commit (``ride_s`` of
:meth:`agent.store.db.Database.write`). The marks are awaited, durable before the post (they
are why a batch the cloud may hold is never sent in another form), and wait up to
``mark_ride_s`` for a reading commit; the acknowledgement waits while the uploader sleeps, and
the next step waits for it first. An acknowledgement lost in a crash costs a resend of its rows
only, which the cloud takes once by their numbers. With no reading commit coming (a quiet
farm), each commits alone after its wait.

Batches are signed with the cloud's time as the agent's clock (:mod:`agent.clock`) estimates it
from the cloud's answers, so an agent whose clock is not yet set syncs at once; a batch refused
for its clock is signed again with the time that refusal told, and sent again at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

import aiohttp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.clock import AgentClock
from agent.sync.batcher import Series, build_records, now_ms, series_ids
from agent.sync.link import CloudLink
from agent.sync.outbox import OutboxStore
from agent.sync.outbox_rows import Selection
from agent.sync.replica import IdentityReplica
from farmkit.backoff import Backoff
from protocol.sync import (
    AGENT_HEADER,
    MAX_BATCH_BYTES,
    SIGNATURE_HEADER,
    Ack,
    Batch,
    pack_batch,
)

__all__ = ["StuckAlert", "SyncPolicy", "SyncStatus", "Uploader"]

log = logging.getLogger(__name__)

PATH = "/api/v1/sync/batches"
PROBE_PATH = "/health"
# A batch uses this share of the cloud's limits: JSON sizes are measured exactly, but the
# margin covers a cloud that lowers its limit between two answers.
_MARGIN = 0.8


@dataclass(frozen=True)
class SyncPolicy:
    """Batch caps, pacing, back-off and the outbox bounds (from the agent's settings)."""

    batch_max_records: int = 25_000
    batch_max_bytes: int = 2 * 1024 * 1024
    """Until the cloud announces its limits: the largest batch, decompressed JSON."""
    batch_max_body_bytes: int = 768 * 1024
    """Until the cloud announces its limits: the largest gzip body."""
    idle_interval_s: float = 5.0
    heartbeat_s: float = 4.0
    mark_ride_s: float = 1.0
    """Caught up, how long a batch's in-flight marks may wait for a reading commit to ride
    (:meth:`agent.store.db.Database.write`), and never longer than the uploader sleeps
    between two batches; the batch is posted once they are durable. (Its acknowledgement
    may wait as long as the uploader sleeps after it.)"""
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 300.0
    request_timeout_s: float = 30.0
    probe_interval_s: float = 5.0
    stuck_after_failures: int = 3
    outbox_max_bytes: int = 256 * 1024 * 1024
    min_free_disk_bytes: int = 256 * 1024 * 1024

    @property
    def idle_s(self) -> float:
        """How long the uploader sleeps after a batch when caught up."""
        return min(self.idle_interval_s, self.heartbeat_s)


@dataclass(frozen=True)
class _Ready:
    """A batch encoded and signed, ready to post."""

    rows: Selection
    body: bytes
    signature: str
    dropped: int
    """Rows accounted for but not sent (see :class:`agent.sync.batcher.Outgoing`)."""
    fresh: bool
    """Taken for this batch and never posted: a post that never reached the cloud may
    release them."""
    full: bool = False
    """More is waiting behind it: the batch was cut to the limits, resends rows posted
    before, or is the latest state ahead of a backfill. Only then is the next batch taken
    at once; at a farm's trickle the uploader waits ``idle_interval_s`` between batches, so
    a batch's marks and acknowledgement ride reading commits every few seconds, not a
    commit each after every reading commit."""


@dataclass
class SyncStatus:
    """The link as operators see it."""

    connected: bool = False
    last_error: str | None = None
    last_attempt_ms: int | None = None
    round_trip_ms: int = 0
    bytes_sent: int = 0
    """Compressed batch bytes posted since start (what the link costs)."""
    failures: int = 0
    """Uploads failed in a row."""
    stuck_since_ms: int | None = None
    """Set once the cloud answered errors ``stuck_after_failures`` times in a row."""
    splits: int = 0
    """Batches cut smaller because the cloud refused their size."""


StuckAlert = Callable[[SyncStatus], Awaitable[None]]


class UploadRefused(Exception):
    """The cloud answered something other than an ack."""

    def __init__(
        self, status: int, body: bytes, retry_after: float | None, limits: dict[str, int]
    ) -> None:
        super().__init__(f"cloud answered {status}: {body[:200].decode(errors='replace')}")
        self.status = status
        self.retry_after = retry_after
        self.limits = limits
        self.clock_skew = status == 409 and _details_of(body).get("reason") == "clock_skew"


class Uploader:
    """Owns the upload loop of a paired agent."""

    def __init__(
        self,
        link: CloudLink,
        key: Ed25519PrivateKey,
        outbox: OutboxStore,
        replica: IdentityReplica,
        policy: SyncPolicy,
        *,
        on_stuck: StuckAlert | None = None,
        rand: Callable[[], float] = random.random,
        clock: AgentClock | None = None,
    ) -> None:
        self._clock = clock or AgentClock(lambda: True)
        self._link = link
        self._key = key
        self._outbox = outbox
        self._replica = replica
        self._policy = policy
        self._on_stuck = on_stuck
        self._rand = rand
        self._last_post = 0.0
        self._max_json = policy.batch_max_bytes
        self._max_body = policy.batch_max_body_bytes
        self._catching_up = True
        self._behind = True
        """Whether the last batch left more waiting (or failed): the next batch's marks and
        acknowledgement then commit at once, as a backlog drains, to its last batch; caught
        up, they ride reading commits."""
        self._acking: asyncio.Task[None] | None = None
        """The acknowledgement of the last batch at a trickle, waiting for a commit to ride."""
        self.before_catch_up: Callable[[], Awaitable[object]] | None = None
        """Run before the first batch after start-up or an outage (staged readings folded)."""
        self._next: asyncio.Task[_Ready | None] | None = None
        self._first_failure_ms = 0
        self.status = SyncStatus()
        self._session: aiohttp.ClientSession | None = None

    async def run(self) -> None:
        """Upload until cancelled; failures back off up to ``backoff_max_s`` and retry."""
        timeout = aiohttp.ClientTimeout(total=self._policy.request_timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            self._session = session
            while True:
                try:
                    more = await self.step()
                except asyncio.CancelledError:
                    await self._drop_next(cancel=True)
                    await self._drop_acknowledgement()
                    raise
                except Exception as err:  # supervised: any failure is logged and retried
                    self._behind = True
                    await self._drop_next()
                    delay, answered = await self._failed(err)
                else:
                    self._succeeded()
                    if not more:
                        # Idle: wake at least every heartbeat, so a revocation made in the
                        # cloud takes effect here within about one heartbeat (issue 16).
                        await asyncio.sleep(self._policy.idle_s)
                    continue
                # Waited out of the handler: the failure's traceback holds the failed step's
                # frames, and with them its batch (tens of thousands of rows, its body) and the
                # one prepared behind it, through an outage of hours.
                if answered:
                    await asyncio.sleep(delay)
                else:
                    await self._probe_until_reachable(delay)

    def _succeeded(self) -> None:
        if self.status.stuck_since_ms is not None:
            log.warning("sync recovered after %d failures", self.status.failures)
        self.status.failures = 0
        self.status.stuck_since_ms = None

    async def _failed(self, err: Exception) -> tuple[float, bool]:
        """Count, log and alert a failed step; the wait before the next one, and whether the
        cloud answered (else it is probed for until it does)."""
        status = self.status
        status.failures += 1
        if status.failures == 1:
            self._first_failure_ms = now_ms()
        # Logged as text: a log record kept by a handler must not keep the failure's
        # traceback, and with it the failed batch (see run()).
        status.last_error = error = str(err)
        delay = self._backoff(status.failures, err)
        answered = isinstance(err, UploadRefused)
        status.connected = False
        if not answered:
            self._catching_up = True  # after an outage: the latest state before the backfill
        log.warning("sync failed (%d in a row), retrying in %.1f s: %s",
                    status.failures, delay, error)  # fmt: skip
        if (
            answered
            and status.stuck_since_ms is None
            and status.failures >= self._policy.stuck_after_failures
        ):
            status.stuck_since_ms = self._first_failure_ms
            log.error("sync stuck since %s: %s", status.stuck_since_ms, error)
            if self._on_stuck is not None:
                try:
                    await self._on_stuck(status)
                except Exception:
                    log.exception("raising the stuck-sync alert failed")
        return delay, answered

    async def _probe_until_reachable(self, delay: float) -> None:
        """Wait at least ``delay`` and until a cheap request finds the cloud answering, probing
        every ``probe_interval_s`` (or ``delay``, if shorter): an unreachable cloud costs no
        batch building, and its return is noticed within one probe interval."""
        assert self._session is not None, "run() owns the HTTP session"
        interval = min(delay, self._policy.probe_interval_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        while True:
            await asyncio.sleep(interval)
            asked = time.monotonic()
            try:
                async with self._session.get(
                    self._link.cloud_url + PROBE_PATH,
                    timeout=aiohttp.ClientTimeout(total=min(5.0, self._policy.probe_interval_s)),
                ) as resp:
                    self._learn_time(asked, resp.headers, None)
                    if resp.status < 500:
                        if loop.time() < deadline:
                            log.info("cloud answers again: resuming sync")
                        return
            except (aiohttp.ClientError, TimeoutError):
                continue

    def _backoff(self, failures: int, err: Exception) -> float:
        cap = self._policy.backoff_max_s
        if isinstance(err, UploadRefused) and err.retry_after is not None:
            return min(cap, err.retry_after)
        return Backoff(self._policy.backoff_initial_s, cap).delay(failures - 1, self._rand)

    async def step(self) -> bool:
        """One batch (or an identity refresh when idle); ``True`` if more is waiting."""
        await self.acknowledged()
        if self._clock.move_due():
            # NTP has just set the clock: readings stamped before go once they are moved.
            await self._drop_next()
            return False
        ready = await self._take_next()
        if ready is None:
            ready = await self._take()
            if ready is None:
                return False
        skewed = False
        while True:
            if ready.full:
                self._next = asyncio.create_task(self._prepare_after(ready.rows))
            try:
                ack = await self._post(ready.body, ready.signature)
                break
            except aiohttp.ClientConnectorError:
                # The request never reached the cloud: what was taken may be compacted again.
                # (Rows of an earlier post whose answer was lost stay in flight.) The next
                # batch's marks go too: it is thrown away first.
                await self._drop_next()
                if ready.fresh:
                    await self._outbox.release()
                raise
            except UploadRefused as err:
                await self._drop_next()
                if err.clock_skew and not skewed:
                    # The refusal told the cloud's time: the same rows, signed with it, once.
                    skewed = True
                    log.warning("cloud refused a batch for the agent's clock (about %.0f s"
                                " behind the cloud): signing with the cloud's time",
                                self._clock.behind_cloud_s() or 0.0)  # fmt: skip
                    ready = await self._fit(ready.rows, fresh=ready.fresh, more=ready.full)
                    continue
                if err.status != 413 or len(ready.rows) == 0:
                    raise
                self._learn(err.limits, refused=len(ready.body))
                self.status.splits += 1
                log.warning("cloud refused a %d-byte batch of %d records for its size:"
                            " splitting it", len(ready.body), len(ready.rows))  # fmt: skip
                ready = await self._fit(ready.rows.head(max(1, len(ready.rows) // 2)),
                                        fresh=ready.fresh, more=True)  # fmt: skip
        # The body is answered: only the rows are needed now (their numbers), not its bytes.
        sent, dropped, more = ready.rows, ready.dropped, ready.full
        del ready
        if more or self._behind:  # a backlog's, to its last batch: at once, as it drains
            await self._outbox.acknowledge(sent, ack.acked_seq, ack.rejected + dropped)
        else:
            # Caught up: the acknowledgement rides a reading commit while the uploader sleeps
            # (the next step waits for it first). Lost in a crash, it costs a resend that the
            # cloud takes once, by the rows' numbers.
            self._acking = asyncio.create_task(
                self._outbox.acknowledge(
                    sent, ack.acked_seq, ack.rejected + dropped, ride_s=self._policy.idle_s
                )
            )
        self._behind = more
        for refusal in ack.refused:
            log.warning("cloud refused %s %s (seq %d): %s",
                        refusal.kind, refusal.key, refusal.seq, refusal.reason)  # fmt: skip
        self._learn({"max_batch_bytes": ack.max_batch_bytes,
                     "max_body_bytes": ack.max_body_bytes or 0})  # fmt: skip
        if ack.identity is not None:
            await self._replica.apply(ack.identity)
        return len(sent) > 0 and more

    async def acknowledged(self) -> None:
        """Wait until the last batch's acknowledgement is durable: at a trickle it rides a
        reading commit after :meth:`step` has returned (the next step waits for it first). Its
        failure is raised here."""
        task, self._acking = self._acking, None
        if task is not None:
            await task

    async def _drop_acknowledgement(self) -> None:
        """On shutdown: stop waiting for the acknowledgement still riding. Its write still
        commits, when the database closes at the latest; if the process dies first, its rows
        are sent again and the cloud takes them once."""
        task, self._acking = self._acking, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task

    async def _take(self) -> _Ready | None:
        """The next batch when none was prepared: rows in flight first, else fresh ones;
        ``None`` when there is nothing to send and no heartbeat is due.

        A method of its own, so the rows a batch was cut from (up to ``batch_max_records``)
        are not kept while it is posted: the next batch reads those left in flight again."""
        limit = self._policy.batch_max_records
        rows = await self._outbox.in_flight(limit, with_entities=True)
        fresh = not rows
        latest = False
        if fresh:
            if self._catching_up and self.before_catch_up is not None:
                await self.before_catch_up()
            latest = self._catching_up and await self._outbox.bulk_waiting() > limit
            self._catching_up = False
            # Caught up, the marks ride a reading commit (they must be durable before the
            # post, and are awaited); behind, they commit at once.
            policy = self._policy
            ride = None if self._behind or latest else min(policy.mark_ride_s, policy.idle_s)
            rows = await self._outbox.take(limit, latest_first=latest, ride_s=ride)
        # With nothing to send, an empty batch every heartbeat asks for a newer identity
        # delta (the cloud answers none when the replica's version is current).
        if not rows and time.monotonic() - self._last_post < self._policy.heartbeat_s:
            return None
        return await self._fit(rows, fresh=fresh, more=latest or not fresh)

    async def _prepare_after(self, posting: Selection) -> _Ready | None:
        """The batch after ``posting``, made while it is posted: the rest of what is in flight
        above it if any (a batch cut to the limits leaves some), else fresh rows beside it;
        ``None`` when there is nothing, or the next rows must wait for its answer."""
        limit = self._policy.batch_max_records
        rows: Selection | None = await self._outbox.in_flight(limit, above=posting.top)
        fresh = not rows
        if fresh:
            rows = await self._outbox.take_beside(
                limit, posting, max_bytes=self._policy.outbox_max_bytes
            )
        if not rows:
            return None
        return await self._fit(rows, fresh=fresh, more=not fresh)

    async def _take_next(self) -> _Ready | None:
        """The batch prepared while the last one was posted, if its answer was an ack."""
        task, self._next = self._next, None
        return None if task is None else await task

    async def _drop_next(self, *, cancel: bool = False) -> None:
        """Throw the next batch away once it is made (or ``cancel`` it, on shutdown): rows it
        marked stay in flight and go first, unchanged, unless the caller releases them."""
        task, self._next = self._next, None
        if task is None:
            return
        if cancel:
            task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task

    def _learn(self, limits: dict[str, int], refused: int | None = None) -> None:
        """Adopt the cloud's announced limits (with a margin); without any, halve what was
        refused."""
        announced_json = int(limits.get("max_batch_bytes") or 0)
        announced_body = int(limits.get("max_body_bytes") or 0)
        if announced_json:
            self._max_json = int(min(announced_json, MAX_BATCH_BYTES) * _MARGIN)
        if announced_body:
            self._max_body = int(announced_body * _MARGIN)
        if refused is not None and not (announced_json or announced_body):
            self._max_body = max(1024, min(self._max_body, refused // 2))

    async def _fit(self, rows: Selection, *, fresh: bool, more: bool = False) -> _Ready:
        """The longest head of ``rows`` whose batch fits the limits, encoded and signed;
        ``more``: more is known to wait behind ``rows`` (see :attr:`_Ready.full`)."""
        full = more or len(rows) >= self._policy.batch_max_records
        while True:
            series = await self._outbox.series(series_ids(rows))
            ranges = tuple(await self._outbox.claims(rows.seqs))
            version = await self._replica.version()
            # CPU-bound (records, JSON, gzip, signature): off the event loop, so the farm's
            # requests and ingest go on meanwhile (zlib gives up the GIL while it works).
            size, body, signature, dropped = await asyncio.to_thread(
                self._encode, rows, series, ranges, version
            )
            over = max(size / self._max_json, len(body) / self._max_body)
            if over <= 1 or len(rows) <= 1:
                return _Ready(rows, body, signature, dropped, fresh, full)
            rows = rows.head(max(1, int(len(rows) / over * 0.9)))
            full = True

    def _encode(
        self, rows: Selection, series: Series, ranges: tuple[tuple[int, int], ...], version: int
    ) -> tuple[int, bytes, str, int]:
        """A batch of ``rows``: its JSON size, gzip body, signature and rows dropped."""
        outgoing = build_records(rows, series)
        batch = Batch(
            agent_id=self._link.agent_id,
            sent_at=self._clock.cloud_now_ms(),
            records=tuple(outgoing.records),
            ranges=ranges,
            identity_version=version,
        )
        size, body, signature = pack_batch(batch, self._key)
        return size, body, signature, outgoing.dropped

    def _learn_time(self, asked: float, headers: Mapping[str, str], error: bytes | None) -> None:
        """What an answer tells of the cloud's time: a refusal for the clock says it to the
        millisecond (its details' ``cloud_time_ms``), an error envelope by its ``timestamp``,
        any answer to the second by its ``Date`` header."""
        answered = time.monotonic()
        exact = None if error is None else _time_of(error)
        if exact is not None:
            self._clock.learn_cloud_time(exact, asked, answered)
            return
        with contextlib.suppress(TypeError, ValueError, IndexError):
            date = parsedate_to_datetime(headers.get("Date", ""))
            self._clock.learn_cloud_time(date.timestamp() * 1000, asked, answered,
                                         resolution_ms=1000)  # fmt: skip

    async def _post(self, body: bytes, signature: str) -> Ack:
        assert self._session is not None, "run() owns the HTTP session"
        headers = {
            AGENT_HEADER: self._link.agent_id,
            SIGNATURE_HEADER: signature,
            "Content-Type": "application/octet-stream",
        }
        started = time.monotonic()
        self._last_post = started
        self.status.bytes_sent += len(body)
        self.status.last_attempt_ms = now_ms()
        async with self._session.post(
            self._link.cloud_url + PATH, data=body, headers=headers
        ) as resp:
            answer = await resp.read()
            self._learn_time(started, resp.headers, None if resp.status == 200 else answer)
            if resp.status != 200:
                retry = resp.headers.get("Retry-After")
                raise UploadRefused(
                    resp.status, answer, float(retry) if retry else None, _limits_of(answer)
                )
        self.status.connected = True
        self.status.last_error = None
        self.status.round_trip_ms = round((time.monotonic() - started) * 1000)
        return Ack.model_validate_json(answer)


def _details_of(answer: bytes) -> dict[str, object]:
    """The details of an error envelope, if it is one."""
    try:
        details = json.loads(answer).get("error", {}).get("details", {})
    except (ValueError, AttributeError):
        return {}
    return details if isinstance(details, dict) else {}


def _time_of(answer: bytes) -> float | None:
    """The cloud's time in an error envelope, in unix milliseconds: the clock it checked a
    batch with (details' ``cloud_time_ms``), else the envelope's ``timestamp``."""
    told = _details_of(answer).get("cloud_time_ms")
    if isinstance(told, int | float):
        return float(told)
    try:
        stamp = json.loads(answer).get("timestamp")
        return datetime.fromisoformat(str(stamp)).timestamp() * 1000
    except (ValueError, AttributeError, TypeError):
        return None


def _limits_of(answer: bytes) -> dict[str, int]:
    """The limits a 413 error envelope carries in its details, if any."""
    details = _details_of(answer)
    try:
        return {k: int(v) for k, v in details.items()  # type: ignore[call-overload]
                if k in ("max_batch_bytes", "max_body_bytes")}  # fmt: skip
    except (ValueError, TypeError):
        return {}
