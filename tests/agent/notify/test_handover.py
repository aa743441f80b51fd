"""A message the agent cannot deliver for FARM_NOTIFY_HANDOVER_AFTER_S is handed to the cloud
(in the sync outbox, composed) while the agent is paired, and the agent never sends it again;
unpaired, it keeps trying itself."""

from __future__ import annotations

import json

from agent.web.keys import DATABASE, NOTIFY_DELIVERER
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import (
    FAST,
    add_contact,
    add_rule,
    notifications,
    record_event,
    until,
)
from tests.conftest import AgentFactory
from tests.support.mosquitto import free_port


async def test_a_paired_agent_hands_an_undeliverable_message_to_the_cloud_once(
    make_agent: AgentFactory,
) -> None:
    agent = await make_agent(**FAST, notify_handover_after_s=0)
    agent.client.app[NOTIFY_DELIVERER].can_hand_over = lambda: True  # as once paired
    farm_id = await create_farm(agent, "North")
    dead = await add_contact(agent, farm_id, f"ntfy://127.0.0.1:{free_port()}/gone")
    await add_rule(agent, farm_id, [dead["id"]])

    event_id = await record_event(agent, farm_id)

    [handed] = await until(
        lambda: notifications(agent, event_id=event_id),
        lambda ns: ns and ns[0]["status"] == "handover",
    )
    assert handed["answer"].endswith("handed to the cloud")
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT op, payload FROM outbox WHERE entity = 'notifications'"
    )
    [(op, payload)] = [(row["op"], json.loads(row["payload"])) for row in rows]
    assert op == "upsert" and payload["id"] == handed["id"]
    assert payload["contact_point_id"] == dead["id"] and payload["farm_id"] == farm_id
    assert "North" in payload["title"] and "temperature 35 above 30" in payload["body"]
    # Handed over is final: the agent's loop does not take it again.
    for _ in range(3):
        await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    await agent.client.app[NOTIFY_DELIVERER].drain()
    [after] = await notifications(agent, event_id=event_id)
    assert after["attempts"] == handed["attempts"] == 1


async def test_an_unpaired_agent_keeps_trying_itself(make_agent: AgentFactory) -> None:
    agent = await make_agent(**FAST, notify_handover_after_s=0)
    farm_id = await create_farm(agent)
    dead = await add_contact(agent, farm_id, f"ntfy://127.0.0.1:{free_port()}/gone")
    await add_rule(agent, farm_id, [dead["id"]])
    event_id = await record_event(agent, farm_id)
    [retried] = await until(
        lambda: notifications(agent, event_id=event_id),
        lambda ns: ns and ns[0]["attempts"] >= 2,
    )
    assert retried["status"] == "pending"
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT 1 FROM outbox WHERE entity = 'notifications'"
    )
    assert list(rows) == []
