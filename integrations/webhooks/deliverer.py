"""The delivery loop shared by the agent and the cloud: claim due deliveries from the outbox,
post them concurrently, decide what each outcome means, and let the store record it.

What differs between the two sides is only the store (:class:`DeliveryStore`): the agent's
SQLite outbox, or the cloud's PostgreSQL one whose claim locks rows (``FOR UPDATE SKIP
LOCKED``) until the outcome is recorded, so several cloud processes never post one delivery
at once. A delivery is marked delivered only after the receiver's 2xx: a crash in between
sends it again with the same ``webhook-id``, which is how Standard Webhooks receivers dedupe.

Policy (docs/adr/0051-outgoing-webhooks.md): a failed delivery is retried after
``retry.delay(attempt)`` (exponential, jittered; farmkit/backoff.py) until ``retry_window_s``
has passed since it was queued, then it is failed for good. A webhook whose every attempt has
failed for ``disable_after_s`` is disabled by the store, which records a ``webhook_disabled``
event. Each loop has at most ``batch`` posts in flight, ``workers`` loops run, and every post
has ``timeout_s``: a slow receiver holds one loop for at most that long, never the caller.

Idle loops do not each look every ``poll_s``: one of them keeps the time and looks, the others
wait until something is queued (:meth:`WebhookDeliverer.wake`) or a loop found deliveries due,
and then all of them look. On the agent, four loops claiming every second were a few per cent
of its CPU at a farm's pace, with nothing to deliver.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Protocol

from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait
from integrations.webhooks.sender import Attempt, DueDelivery, WebhookSender
from protocol.timefmt import utcnow

__all__ = [
    "ClaimedBatch",
    "DeliveryPolicy",
    "DeliveryStore",
    "Verdict",
    "WebhookDeliverer",
    "verdict_of",
]

log = logging.getLogger(__name__)

# Time for a stopping loop to record its batch's outcomes once its posts are done.
_SETTLE_GRACE_S = 5.0
_PRUNE_CHUNK = 5000

DeliveryStatus = Literal["pending", "delivered", "failed"]


@dataclass(frozen=True)
class DeliveryPolicy:
    """How deliveries are posted and retried."""

    timeout_s: float = 10.0
    batch: int = 50
    workers: int = 4
    poll_s: float = 1.0
    retry: Backoff = field(default_factory=lambda: Backoff(10.0, 3600.0))
    retry_window_s: float = 86_400.0
    disable_after_s: float = 86_400.0
    keep_s: float | None = 30 * 86_400.0
    """Delivered and failed deliveries older than this are deleted; ``None`` keeps them."""
    prune_every_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to record of one attempt."""

    delivery_id: str
    webhook_id: str
    status: DeliveryStatus
    status_code: int | None
    error: str | None
    attempted_at: datetime
    next_attempt_at: datetime | None


class ClaimedBatch(Protocol):
    """Deliveries claimed for this loop until the ``claim`` block ends."""

    @property
    def deliveries(self) -> Sequence[DueDelivery]:
        """The claimed deliveries."""
        ...

    async def settle(self, verdicts: Sequence[Verdict], disable_after_s: float) -> list[str]:
        """Record the verdicts and each webhook's health; disable (with an event) webhooks
        failing for ``disable_after_s``; return the ids of those disabled now."""
        ...


class DeliveryStore(Protocol):
    """The outbox of one side."""

    def claim(self, limit: int, now: datetime) -> AbstractAsyncContextManager[ClaimedBatch]:
        """Up to ``limit`` deliveries due at ``now`` of enabled webhooks, held by this caller."""
        ...

    async def prune(self, before: datetime, chunk: int) -> int:
        """Delete up to ``chunk`` delivered or failed deliveries created before ``before``;
        return how many went (pending ones are never deleted)."""
        ...


def verdict_of(
    delivery: DueDelivery,
    attempt: Attempt,
    at: datetime,
    policy: DeliveryPolicy,
    rand: Callable[[], float] = random.random,
) -> Verdict:
    """Delivered on a 2xx; else retried after the back-off, or failed once the window is over."""
    if attempt.ok:
        status: DeliveryStatus = "delivered"
        next_at = None
    elif (at - delivery.created_at).total_seconds() >= policy.retry_window_s:
        status, next_at = "failed", None
    else:
        status = "pending"
        next_at = at + timedelta(seconds=policy.retry.delay(delivery.attempts, rand))
    return Verdict(
        delivery.id, delivery.webhook_id, status, attempt.status_code, attempt.error, at, next_at
    )


class WebhookDeliverer:
    """Owns the delivery loops: :meth:`start`, :meth:`wake` when something was queued,
    :meth:`stop`."""

    def __init__(
        self,
        store: DeliveryStore,
        sender: WebhookSender,
        policy: DeliveryPolicy,
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._sender = sender
        self._policy = policy
        self._now = now
        self._wakeup = asyncio.Event()
        self._timekeeper = False
        """Whether an idle loop waits with the ``poll_s`` time-out (the others wait for a wake)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._stopped = asyncio.Event()
        self.delivered = 0
        self.failed_attempts = 0

    def start(self) -> None:
        """Start the loops."""
        for n in range(self._policy.workers):
            self._tasks.append(asyncio.create_task(self._loop(), name=f"webhooks-{n}"))
        if self._policy.keep_s is not None:
            self._tasks.append(asyncio.create_task(self._prune_loop(), name="webhooks-prune"))

    async def stop(self) -> None:
        """Let each loop finish the batch it is posting (its posts are bounded by
        ``timeout_s``), so what a receiver answered is recorded and not sent again after a
        restart; then stop. A batch still unsettled after that stays pending."""
        self._stopping = True
        self._stopped.set()
        self._wakeup.set()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self._policy.timeout_s + _SETTLE_GRACE_S)
        await cancel_and_wait(*self._tasks)
        self._tasks.clear()
        self._stopping = False
        self._stopped.clear()

    def wake(self) -> None:
        """Something was queued: look now rather than at the next poll."""
        self._wakeup.set()

    async def run_once(self) -> int:
        """Claim, post and settle one batch; return how many deliveries it held.

        Outcomes are settled as they come in (whatever finished since the last settle, in one
        call), not once the slowest post of the batch is done: on the agent each settle commits,
        so a crash re-sends only the posts answered in the last moments before it.
        """
        async with self._store.claim(self._policy.batch, self._now()) as batch:
            due = list(batch.deliveries)
            if not due:
                return 0
            # More may be due (a backlog, a retry of another webhook): the idle loops look too,
            # while this one posts.
            self._wakeup.set()
            done: asyncio.Queue[tuple[Verdict, bool]] = asyncio.Queue()

            async def post(delivery: DueDelivery) -> None:
                attempt = await self._sender.send(delivery)
                verdict = verdict_of(delivery, attempt, self._now(), self._policy)
                done.put_nowait((verdict, attempt.ok))

            posts = [asyncio.create_task(post(d)) for d in due]
            try:
                settled = 0
                while settled < len(due):
                    outcomes = [await done.get()]
                    while not done.empty():
                        outcomes.append(done.get_nowait())
                    disabled = await batch.settle(
                        [verdict for verdict, _ in outcomes], self._policy.disable_after_s
                    )
                    settled += len(outcomes)
                    ok = sum(1 for _, success in outcomes if success)
                    self.delivered += ok
                    self.failed_attempts += len(outcomes) - ok
                    for webhook_id in disabled:
                        log.warning(
                            "webhook %s disabled: every delivery failed for too long", webhook_id
                        )
            finally:
                await cancel_and_wait(*posts)
        return len(due)

    async def prune_once(self) -> int:
        """Delete what is past ``keep_s`` now, a chunk a transaction; return how many went."""
        if self._policy.keep_s is None:
            return 0
        before = self._now() - timedelta(seconds=self._policy.keep_s)
        total = 0
        while (gone := await self._store.prune(before, _PRUNE_CHUNK)) == _PRUNE_CHUNK:
            total += gone
        return total + gone

    async def _prune_loop(self) -> None:
        while not self._stopping:
            try:
                gone = await self.prune_once()
                if gone:
                    log.info("webhook retention deleted %d deliveries", gone)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook retention failed; retrying at the next run")
            try:
                await asyncio.wait_for(self._stopped.wait(), self._policy.prune_every_s)
            except TimeoutError:
                continue

    async def _loop(self) -> None:
        pause = self._policy.poll_s
        while not self._stopping:
            try:
                if await self.run_once():
                    pause = self._policy.poll_s
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook delivery failed; retrying")
                pause = min(60.0, pause * 2)
                await asyncio.sleep(pause)
                continue
            await self._idle()

    async def _idle(self) -> None:
        """Wait for a wake-up; the first loop to get here also for ``poll_s`` at most."""
        if self._timekeeper:
            await self._wakeup.wait()
        else:
            self._timekeeper = True
            try:
                async with asyncio.timeout(self._policy.poll_s):
                    await self._wakeup.wait()
            except TimeoutError:
                return
            finally:
                self._timekeeper = False
        await asyncio.sleep(0)  # every loop waiting sees the wake-up before it is cleared
        self._wakeup.clear()
