"""The notification sender shared by the agent and the cloud: plan repeats and escalations,
take due notifications from the outbox, send each through its contact point, and let the store
record what the service answered.

Exactly once to the sender: a notification is marked sent only after the service took it (a
crash in between sends it again: the one case of a duplicate, when the service took it and the
answer was lost). Each outcome is committed as soon as it is known, not once the batch is done,
so a crash re-sends only what was in flight. A failed send is retried after
``retry.delay(attempt)`` until ``retry_window_s`` has passed since it was queued, then failed for
good. Quiet hours hold a contact point's non-critical messages until the window's end; a hold
is not an attempt.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait
from integrations.notify.ack_links import AckLinks
from integrations.notify.message import Message, Where, compose
from integrations.notify.quiet import quiet_until
from integrations.notify.sender import ContactSender, Outcome
from protocol.timefmt import utcnow

__all__ = [
    "DueNotification",
    "NotifyDeliverer",
    "NotifyPolicy",
    "NotifyStore",
    "Settled",
    "settled_of",
]

log = logging.getLogger(__name__)

Status = Literal["pending", "sent", "failed", "handover"]


@dataclass(frozen=True)
class NotifyPolicy:
    """How notifications are sent and retried."""

    poll_s: float = 1.0
    batch: int = 50
    retry: Backoff = field(default_factory=lambda: Backoff(10.0, 600.0))
    retry_window_s: float = 86_400.0
    failing_event_after_s: float = 3600.0
    """A contact point whose every send failed this long raises a ``contact_point_failing``."""
    timezone: str = "UTC"
    """The zone of quiet hours."""
    public_url: str | None = None
    """The web app's address, for the link in each message."""
    plan_every_s: float = 5.0
    handover_after_s: float | None = None
    """A message the service has not taken this long after it was queued is handed to the
    cloud (when the agent is paired): the cloud sends it, the agent no more."""


@dataclass(frozen=True, slots=True)
class DueNotification:
    """A notification to send now, with what its message is made of."""

    id: str
    contact_point_id: str
    url: str
    step: str
    severity: str
    event: dict[str, Any]
    where: Where
    attempts: int
    created_at: datetime
    quiet_start: str | None = None
    quiet_end: str | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """What to record of one notification: sent, retried later, failed, or held (quiet
    hours; ``attempted`` False)."""

    id: str
    contact_point_id: str
    status: Status
    answer: str | None
    at: datetime
    next_attempt_at: datetime | None
    attempted: bool = True
    handover: Message | None = None
    """With ``status`` handover: the message as the cloud is to send it."""


class NotifyStore(Protocol):
    """The outbox of one side."""

    async def plan(self, now: datetime) -> int:
        """Queue the repeats and escalations due at ``now``; cancel what no longer applies
        (a device back online, an acknowledged alert's repeats); return how many changed."""
        ...

    async def due(self, limit: int, now: datetime, busy: frozenset[str]) -> list[DueNotification]:
        """Up to ``limit`` pending notifications due at ``now`` (not in ``busy``) of enabled
        contact points."""
        ...

    async def settle(self, settled: Sequence[Settled], failing_event_after_s: float) -> None:
        """Record outcomes and each contact point's health; raise ``contact_point_failing``
        for one failing ``failing_event_after_s``."""
        ...


def settled_of(
    due: DueNotification,
    outcome: Outcome,
    at: datetime,
    policy: NotifyPolicy,
    rand: Callable[[], float] = random.random,
    *,
    handover: Message | None = None,
) -> Settled:
    """Sent when the service took it; else handed to the cloud (``handover``, the message,
    given when the agent may and the time has come), retried after the back-off, or failed
    once the retry window is over."""
    if outcome.ok:
        return Settled(due.id, due.contact_point_id, "sent", outcome.answer, at, None)
    waited = (at - due.created_at).total_seconds()
    if (
        handover is not None
        and policy.handover_after_s is not None
        and waited >= policy.handover_after_s
    ):
        answer = f"{outcome.answer}; handed to the cloud"
        return Settled(
            due.id, due.contact_point_id, "handover", answer, at, None, handover=handover
        )
    if waited >= policy.retry_window_s:
        return Settled(due.id, due.contact_point_id, "failed", outcome.answer, at, None)
    later = at + timedelta(seconds=policy.retry.delay(due.attempts, rand))
    return Settled(due.id, due.contact_point_id, "pending", outcome.answer, at, later)


class NotifyDeliverer:
    """Owns the sending loop: :meth:`start`, :meth:`wake` when something was queued,
    :meth:`stop`."""

    def __init__(
        self,
        store: NotifyStore,
        sender: ContactSender,
        policy: NotifyPolicy,
        *,
        now: Callable[[], datetime] = utcnow,
        ack_links: AckLinks | None = None,
    ) -> None:
        self._store = store
        self._sender = sender
        self._policy = policy
        self._ack_links = ack_links
        self._now = now
        self._wakeup = asyncio.Event()
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._planned_at: datetime | None = None
        self._running = asyncio.Lock()
        self.can_hand_over: Callable[[], bool] = lambda: False
        """Whether the cloud can take messages over now (the agent is paired)."""
        self.sent = 0
        self.failed_attempts = 0

    def start(self) -> None:
        """Start the loop."""
        self._task = asyncio.create_task(self._loop(), name="notify")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Let the sends under way finish and be recorded (bounded by ``grace_s``), so what a
        service took is not sent again after a restart; then stop."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        pending = list(self._inflight.values())
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        await cancel_and_wait(*self._inflight.values())
        self._inflight.clear()

    def wake(self) -> None:
        """Something was queued: look now rather than at the next poll."""
        self._wakeup.set()

    def link_of(self, event_id: str | None) -> str | None:
        """The web app's page of an event's alert, when the public address is known."""
        if self._policy.public_url is None:
            return None
        base = self._policy.public_url.rstrip("/")
        return f"{base}/#/alerts" + (f"?event={event_id}" if event_id else "")

    def acknowledge_link_of(self, notification_id: str) -> str | None:
        """The signed link that acknowledges a notification's event, when the public address
        is known."""
        if self._policy.public_url is None or self._ack_links is None:
            return None
        token = self._ack_links.token(notification_id, self._now())
        base = self._policy.public_url.rstrip("/")
        return f"{base}/api/v1/notifications/acknowledge?token={token}"

    def message_of(self, due: DueNotification) -> Message:
        """The text of a due notification."""
        event_id = due.event.get("id")
        return compose(
            due.event,
            due.where,
            step=due.step,
            link=self.link_of(event_id),
            acknowledge_link=None if event_id is None else self.acknowledge_link_of(due.id),
        )

    async def run_once(self, *, plan: bool = False) -> int:
        """Plan (every ``plan_every_s``, or now with ``plan``), then start sending what is due
        (not waiting for the sends); return how many were started or held."""
        async with self._running:  # a caller beside the loop never starts a send twice
            return await self._run_once(plan)

    async def _run_once(self, plan: bool) -> int:
        now = self._now()
        if (
            plan
            or self._planned_at is None
            or (now - self._planned_at).total_seconds() >= self._policy.plan_every_s
        ):
            self._planned_at = now
            await self._store.plan(now)
        room = self._policy.batch - len(self._inflight)
        if room <= 0:
            return 0
        due = await self._store.due(room, now, frozenset(self._inflight))
        held: list[Settled] = []
        for item in due:
            until = None
            if item.severity != "critical":
                until = quiet_until(now, item.quiet_start, item.quiet_end, self._policy.timezone)
            if until is not None:
                held.append(
                    Settled(item.id, item.contact_point_id, "pending", None, now, until, False)
                )
                continue
            self._inflight[item.id] = asyncio.create_task(self._send(item))
        if held:
            await self._store.settle(held, self._policy.failing_event_after_s)
        return len(due)

    async def drain(self) -> None:
        """Wait for the sends under way (tests, benches)."""
        while self._inflight:
            await asyncio.wait(list(self._inflight.values()))

    async def _send(self, due: DueNotification) -> None:
        try:
            message = self.message_of(due)
            outcome = await self._sender.send(due.url, message)
            handover = None
            if due.step != "test" and self.can_hand_over():
                # The cloud's copy: no acknowledge button (its link is the agent's).
                handover = Message(message.title, message.body, message.link)
            settled = settled_of(due, outcome, self._now(), self._policy, handover=handover)
            await asyncio.shield(self._store.settle([settled], self._policy.failing_event_after_s))
            if outcome.ok:
                self.sent += 1
            else:
                self.failed_attempts += 1
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("notification %s: recording its outcome failed", due.id)
        finally:
            self._inflight.pop(due.id, None)
            self._wakeup.set()

    async def _loop(self) -> None:
        pause = self._policy.poll_s
        while True:
            try:
                if await self.run_once():
                    pause = self._policy.poll_s
                    await asyncio.sleep(0)
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("notification sending failed; retrying")
                pause = min(60.0, pause * 2)
                await asyncio.sleep(pause)
                continue
            try:
                async with asyncio.timeout(self._policy.poll_s):
                    await self._wakeup.wait()
            except TimeoutError:
                continue
            self._wakeup.clear()
