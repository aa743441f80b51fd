"""The delivery loops: while nothing is due one loop looks at each poll, not every loop; a
delivery found at a poll brings the idle loops to look too, so a slow receiver holds only its
own loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from integrations.webhooks import Attempt, DeliveryPolicy, DueDelivery, Verdict, WebhookDeliverer

_AT = datetime(2026, 12, 7, tzinfo=UTC)


class _Batch:
    def __init__(self, deliveries: list[DueDelivery]) -> None:
        self.deliveries = deliveries

    async def settle(self, verdicts: Sequence[Verdict], disable_after_s: float) -> list[str]:
        return []


class _Outbox:
    """Pending deliveries in memory, each claimed once; records which loop looked."""

    def __init__(self, looks_wanted: int = 0) -> None:
        self.pending: list[DueDelivery] = []
        self.lookers: list[str] = []
        self._looks_wanted = looks_wanted
        self.looked = asyncio.Event()

    @asynccontextmanager
    async def claim(self, limit: int, now: datetime) -> AsyncIterator[_Batch]:
        task = asyncio.current_task()
        self.lookers.append("" if task is None else task.get_name())
        if len(self.lookers) >= self._looks_wanted:
            self.looked.set()
        taken, self.pending = self.pending[:limit], self.pending[limit:]
        yield _Batch(taken)

    async def prune(self, before: datetime, chunk: int) -> int:
        return 0


class _SlowReceiver:
    """Answers only once released; counts the posts waiting."""

    def __init__(self, waiting_wanted: int) -> None:
        self.waiting = 0
        self._wanted = waiting_wanted
        self.all_waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def send(self, delivery: DueDelivery) -> Attempt:
        self.waiting += 1
        if self.waiting >= self._wanted:
            self.all_waiting.set()
        await self.release.wait()
        return Attempt(ok=True, status_code=204)


def _delivery(n: int) -> DueDelivery:
    return DueDelivery(f"d{n}", f"w{n}", "http://receiver.invalid/", "whsec_x", "{}", 0, _AT)


async def test_while_nothing_is_due_one_loop_looks_at_each_poll() -> None:
    outbox = _Outbox(looks_wanted=24)
    policy = DeliveryPolicy(workers=4, poll_s=0.001, keep_s=None)
    deliverer = WebhookDeliverer(outbox, _SlowReceiver(1), policy)  # type: ignore[arg-type]
    deliverer.start()
    try:
        await asyncio.wait_for(outbox.looked.wait(), 20)
    finally:
        await deliverer.stop()
    # Each loop looks once as it starts; after that the polls are one loop's.
    assert sorted(outbox.lookers[:4]) == [f"webhooks-{n}" for n in range(4)]
    assert len(set(outbox.lookers[4:24])) == 1


async def test_a_delivery_found_at_a_poll_does_not_hold_back_the_next_one() -> None:
    outbox = _Outbox(looks_wanted=8)
    receiver = _SlowReceiver(waiting_wanted=2)
    policy = DeliveryPolicy(workers=4, batch=1, poll_s=0.001, keep_s=None)
    deliverer = WebhookDeliverer(outbox, receiver, policy)  # type: ignore[arg-type]
    deliverer.start()
    try:
        await asyncio.wait_for(outbox.looked.wait(), 20)  # the loops are idle
        # Queued without a wake-up (as a database trigger queues them): a poll finds them.
        outbox.pending = [_delivery(1), _delivery(2)]
        # The first one's receiver has not answered: another loop posts the second meanwhile.
        await asyncio.wait_for(receiver.all_waiting.wait(), 20)
        receiver.release.set()
    finally:
        await deliverer.stop()
    assert deliverer.delivered == 2
