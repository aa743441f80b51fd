"""The agent's delivery outbox answers an idle look without a query on a reader thread: it
asks when the first pending one is due (a point read on the event loop's thread), and a look
that found nothing is free until a commit lands or the next retry is due; then the look sees
what was queued."""

from __future__ import annotations

from datetime import timedelta

from agent.web.keys import DATABASE, WEBHOOK_DELIVERER
from integrations.webhooks import Verdict
from integrations.webhooks.agent_side.store import WebhookStore
from protocol.timefmt import utcnow
from tests.agent.devices_api.conftest import create_farm
from tests.agent.webhooks.conftest import add_webhook, raise_alert
from tests.conftest import Agent, AgentFactory
from tests.support.counted_reads import CountedReads
from tests.support.webhook_receiver import WebhookReceiver


async def _claim_ids(store: WebhookStore, at_s: float = 0.0) -> list[str]:
    async with store.claim(50, utcnow() + timedelta(seconds=at_s)) as batch:
        return [delivery.id for delivery in batch.deliveries]


async def test_an_idle_look_leaves_the_reader_threads_alone_until_something_is_due(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent()
    await agent.client.app[WEBHOOK_DELIVERER].stop()  # this test's store is the only looker
    farm_id = await create_farm(agent)
    await add_webhook(agent, farm_id, receiver)
    db = CountedReads(agent.client.app[DATABASE])
    store = WebhookStore(db)  # type: ignore[arg-type]

    assert await _claim_ids(store) == []
    reads = db.reads
    assert await _claim_ids(store) == []
    assert db.reads == reads  # nothing committed, nothing pending: no query
    await create_farm(agent, "South")  # a commit, nothing queued by it
    assert await _claim_ids(store) == []
    assert db.reads == reads  # the first due time, read on the event loop's thread, said so

    # The event's trigger queues a delivery in the event log's commit: the next look sees it.
    await raise_alert(agent, farm_id)
    async with store.claim(50, utcnow()) as batch:
        (due,) = batch.deliveries
        retry_at = utcnow() + timedelta(seconds=60)
        await batch.settle(
            [Verdict(due.id, due.webhook_id, "pending", 500, None, utcnow(), retry_at)], 86_400
        )

    assert await _claim_ids(store) == []
    reads = db.reads
    assert await _claim_ids(store, at_s=30) == []
    assert db.reads == reads  # the retry is not due yet
    assert await _claim_ids(store, at_s=61) == [due.id]
