"""The watch of silent farms: when a paired agent has sent nothing for ``silent_after`` the
contact points of its farms are told ("Farm North has been silent since 02:14 UTC: power,
network or the agent"), and again when it is back, with how long it was gone.

Every cloud process runs this loop; the store makes sure only one notices a silence and each
message is sent by one process (cloud/store/notify.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cloud.store.notify import CloudNotifyStore, DueMessage, Silence
from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait
from integrations.notify import ContactSender, Message

__all__ = ["SilenceWatch", "WatchPolicy", "compose"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchPolicy:
    """How long a silence is, how often to look, how sends are retried."""

    silent_after_s: float = 600.0
    poll_s: float = 5.0
    batch: int = 20
    lease_s: float = 120.0
    retry: Backoff = field(default_factory=lambda: Backoff(10.0, 600.0))
    retry_window_s: float = 86_400.0


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _lasted(span: timedelta) -> str:
    minutes = max(1, round(span.total_seconds() / 60))
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def compose(silence: Silence, farm: str) -> tuple[str, str]:
    """The title and body of a silence, or of its end."""
    since = _clock(silence.silent_since)
    if silence.back_at is None:
        return (
            f"[CRITICAL] {farm}: silent since {since}",
            f"Farm {farm} has been silent since {since}: power, network or the agent."
            " Nothing it sends reaches the cloud.",
        )
    gone = _lasted(silence.back_at - silence.silent_since)
    return (
        f"[INFO] {farm}: back after {gone}",
        f"Farm {farm} is back: silent from {since} to {_clock(silence.back_at)} ({gone}).",
    )


class SilenceWatch:
    """Owns the loop: :meth:`start`, :meth:`stop`; :meth:`run_once` for one look."""

    def __init__(self, store: CloudNotifyStore, sender: ContactSender, policy: WatchPolicy) -> None:
        self._store = store
        self._sender = sender
        self._policy = policy
        self._task: asyncio.Task[None] | None = None
        self.sent = 0

    def start(self) -> None:
        """Start the loop."""
        self._task = asyncio.create_task(self._loop(), name="notify-silence-watch")

    async def stop(self) -> None:
        """Stop the loop (a send under way is abandoned; its lease makes it due again)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def run_once(self) -> list[Silence]:
        """Notice silences and returns, then send what is due; return what was noticed."""
        noticed = await self._store.watch(timedelta(seconds=self._policy.silent_after_s), compose)
        for silence in noticed:
            what = "silent" if silence.back_at is None else "back from a silence"
            log.warning("agent %s %s since %s", silence.agent_id, what, silence.silent_since)
        due = await self._store.lease(self._policy.batch, timedelta(seconds=self._policy.lease_s))
        if due:
            await asyncio.gather(*(self._send(message) for message in due))
        return noticed

    async def _send(self, message: DueMessage) -> None:
        outcome = await self._sender.send(message.url, Message(message.title, message.body))
        now = datetime.now(UTC)
        if outcome.ok:
            self.sent += 1
            await self._store.settle(message.id, "sent", outcome.answer, None)
        elif (now - message.created_at).total_seconds() >= self._policy.retry_window_s:
            await self._store.settle(message.id, "failed", outcome.answer, None)
        else:
            delay = self._policy.retry.delay(message.attempts, random.random)
            retry_at = now + timedelta(seconds=delay)
            await self._store.settle(message.id, "pending", outcome.answer, retry_at)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("silence watch failed; retrying")
            await asyncio.sleep(self._policy.poll_s)
