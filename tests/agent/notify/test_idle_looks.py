"""The agent's notification outbox answers an idle look without a query on a reader thread: it
asks when the first pending one is due (a point read on the event loop's thread), and a look
that found nothing is free until a commit lands or the next retry is due; then the look sees
what was queued."""

from __future__ import annotations

from datetime import timedelta

from agent.web.keys import NOTIFY_DELIVERER
from integrations.notify import Settled
from protocol.timefmt import utcnow
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import add_contact, add_rule, record_event
from tests.conftest import AgentFactory
from tests.support.counted_reads import CountedReads
from tests.support.ntfy_receiver import NtfyReceiver


async def test_an_idle_look_leaves_the_reader_threads_alone_until_something_is_due(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent()
    deliverer = agent.client.app[NOTIFY_DELIVERER]
    await deliverer.stop()  # this test is the only looker
    store = deliverer._store
    db = store._db = CountedReads(store._db)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url("night"))
    await add_rule(agent, farm_id, [contact["id"]])

    async def due_ids(at_s: float = 0.0) -> list[str]:
        found = await store.due(50, utcnow() + timedelta(seconds=at_s), frozenset())
        return [item.id for item in found]

    assert await due_ids() == []
    reads = db.reads
    assert await due_ids() == []
    assert db.reads == reads  # nothing committed, nothing pending: no query
    await create_farm(agent, "South")  # a commit, nothing queued by it
    assert await due_ids() == []
    assert db.reads == reads  # the first due time, read on the event loop's thread, said so

    # The event's trigger queues the notification in the event log's commit.
    await record_event(agent, farm_id)
    (first,) = await store.due(50, utcnow(), frozenset())
    later = utcnow() + timedelta(seconds=60)
    await store.settle(
        [Settled(first.id, first.contact_point_id, "pending", "503", utcnow(), later)], 3600
    )

    assert await due_ids() == []
    reads = db.reads
    assert await due_ids(at_s=30) == []
    assert db.reads == reads  # the retry is not due yet
    assert await due_ids(at_s=61) == [first.id]
