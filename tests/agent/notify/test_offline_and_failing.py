"""A device offline is told only once it stayed offline for the rule's minutes (not when it came
back before); a contact point failing for long raises its own event, which other contact
points hear of, and shows in /healthz."""

from __future__ import annotations

import sqlite3

from agent.web.keys import DATABASE, NOTIFY_DELIVERER
from tests.agent.devices_api.conftest import create_farm, register, tasmota_sensor
from tests.agent.notify.conftest import (
    FAST,
    add_contact,
    add_rule,
    notifications,
    record_event,
    until,
)
from tests.conftest import Agent, AgentFactory
from tests.support.mosquitto import free_port
from tests.support.ntfy_receiver import NtfyReceiver


async def set_availability(agent: Agent, device_id: str, availability: str) -> None:
    await agent.client.app[DATABASE].write(
        lambda conn: conn.execute(
            "UPDATE devices SET availability = ? WHERE id = ?", (availability, device_id)
        )
    )


async def offline_minutes_pass(agent: Agent, minutes: int) -> None:
    shift = f"-{minutes * 60} seconds"

    def move(conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE notifications SET next_attempt_at"
            " = strftime('%Y-%m-%dT%H:%M:%fZ', next_attempt_at, ?) WHERE status = 'pending'",
            (shift,),
        )

    await agent.client.app[DATABASE].write(move)


async def test_a_device_offline_is_told_only_after_it_stayed_offline(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent, "North")
    pump = await register(
        agent, tasmota_sensor(farm_id, name="Pump A", location="Row 2, rack 1, shelf 3")
    )
    back = await register(
        agent,
        tasmota_sensor(farm_id, name="Fan B", address={"transport": "mqtt", "topic_base": "b"}),
    )
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(
        agent,
        farm_id,
        [contact["id"]],
        kinds=["device_offline"],
        severities=["warning"],
        offline_after_min=10,
    )
    for device in (pump, back):
        await set_availability(agent, device["id"], "offline")
        await record_event(
            agent,
            farm_id,
            kind="device_offline",
            severity="warning",
            message="Device went offline (lwt)",
            data={"status": "offline"},
            device_id=device["id"],
        )
    await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    await agent.client.app[NOTIFY_DELIVERER].drain()
    assert ntfy.received == []  # not yet ten minutes

    await set_availability(agent, back["id"], "online")
    await offline_minutes_pass(agent, 11)
    [message] = await ntfy.wait_for(lambda got: len(got) == 1)
    assert "Pump A" in message.message and "Row 2, rack 1, shelf 3" in message.message
    history = await until(
        lambda: notifications(agent, farm_id=farm_id),
        lambda ns: sorted(n["status"] for n in ns) == ["cancelled", "sent"],
    )
    [cancelled] = [n for n in history if n["status"] == "cancelled"]
    assert cancelled["answer"] == "device back online"
    assert len(ntfy.received) == 1


async def test_a_contact_point_failing_for_long_raises_an_event_heard_elsewhere_and_in_healthz(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST, notify_failing_event_after_s=0)
    farm_id = await create_farm(agent)
    dead = await add_contact(agent, farm_id, f"ntfy://127.0.0.1:{free_port()}/gone", name="old")
    backup = await add_contact(agent, farm_id, ntfy.url("backup"), name="backup")
    await add_rule(agent, farm_id, [dead["id"]])
    await add_rule(
        agent, farm_id, [backup["id"]], kinds=["contact_point_failing"], severities=["error"]
    )

    await record_event(agent, farm_id)

    [told] = await ntfy.wait_for(lambda got: len(got) == 1)
    assert "Contact point old (ntfy) failing since" in told.message
    resp = await agent.client.get(f"/api/v1/contact-points/{dead['id']}", headers=agent.auth())
    failing = await resp.json()
    assert failing["failing_since"] is not None and failing["consecutive_failures"] >= 1
    assert failing["last_error"]

    async def healthz() -> dict[str, object]:
        resp = await agent.client.get("/healthz")
        body: dict[str, object] = await resp.json()
        return body

    body = await until(
        healthz,
        lambda b: str(b["checks"]["notifications"]).startswith("failing: old"),  # type: ignore[index]
    )
    assert body["status"] == "degraded"
    events = await agent.client.get(
        "/api/v1/events", params={"kind": "contact_point_failing"}, headers=agent.auth()
    )
    assert (await events.json())["total"] == 1  # once per failing spell, not per attempt


async def test_settled_notifications_are_kept_ninety_days_and_pending_ones_until_sent(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(agent, farm_id, [contact["id"]])
    sent_id = await record_event(agent, farm_id, message="long ago")
    await until(
        lambda: notifications(agent, event_id=sent_id),
        lambda ns: ns and ns[0]["status"] == "sent",
    )
    # A service that never answers: its message stays pending, retried.
    dead = await add_contact(agent, farm_id, f"ntfy://127.0.0.1:{free_port()}/gone", name="x")
    await add_rule(agent, farm_id, [dead["id"]], kinds=["device_fault"])
    waiting_id = await record_event(agent, farm_id, kind="device_fault", message="waiting")

    def age(conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE notifications SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now',"
            " '-91 days')"
        )

    await agent.client.app[DATABASE].write(age)
    await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    left = await notifications(agent, farm_id=farm_id)
    assert [n["event_id"] for n in left] == [waiting_id]
