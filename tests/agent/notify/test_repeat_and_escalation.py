"""While an alert stays raised and unacknowledged its contact points are told again every N
minutes, and after M minutes a further contact point is told; acknowledging (from the web app's
API) stops both and records who; quiet hours hold all but critical messages. Time passing is
the stored timestamps moved back: the planner reads them, not a clock of the test's."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from agent.web.keys import DATABASE, NOTIFY_DELIVERER
from protocol.timefmt import iso
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import (
    FAST,
    add_contact,
    add_rule,
    notifications,
    record_event,
    until,
)
from tests.conftest import Agent, AgentFactory
from tests.support.ntfy_receiver import NtfyReceiver


async def active_alert(agent: Agent, farm_id: str) -> str:
    """An alert row as the evaluator keeps one while it is raised."""
    alert_id = str(uuid.uuid4())
    now = iso(datetime.now(UTC))

    def insert(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO alerts (id, farm_id, device_id, metric, direction, threshold, severity,"
            " state, raised_at, raised_value) VALUES (?, ?, 'pump-1', 'flow', 'below', 1.0,"
            " 'critical', 'active', ?, 0.0)",
            (alert_id, farm_id, now),
        )

    await agent.client.app[DATABASE].write(insert)
    return alert_id


async def minutes_pass(agent: Agent, minutes: float) -> None:
    """Move every stored moment of the notifications and events back by ``minutes``."""
    shift = f"-{minutes * 60} seconds"

    def move(conn: sqlite3.Connection) -> None:
        for table, column in (
            ("notifications", "sent_at"),
            ("notifications", "created_at"),
            ("events", "ts"),
        ):
            conn.execute(
                f"UPDATE {table} SET {column} = strftime('%Y-%m-%dT%H:%M:%fZ', {column}, ?)"
                f" WHERE {column} IS NOT NULL",
                (shift,),
            )

    await agent.client.app[DATABASE].write(move)


def titles(ntfy: NtfyReceiver, topic: str) -> list[str]:
    return [m.title for m in ntfy.received if m.topic == topic]


async def alert_event(agent: Agent, farm_id: str, alert_id: str) -> str:
    return await record_event(
        agent,
        farm_id,
        message="flow 0 below 1",
        data={"id": alert_id, "metric": "flow", "raised_value": 0.0, "threshold": 1.0},
    )


async def test_a_raised_alert_is_repeated_until_it_is_acknowledged(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent, "North")
    contact = await add_contact(agent, farm_id, ntfy.url("night"))
    await add_rule(agent, farm_id, [contact["id"]], repeat_every_min=15)
    alert_id = await active_alert(agent, farm_id)
    event_id = await alert_event(agent, farm_id, alert_id)
    await ntfy.wait_for(lambda got: len(got) == 1)
    await until(
        lambda: notifications(agent, event_id=event_id),
        lambda ns: ns and ns[0]["status"] == "sent",
    )

    await minutes_pass(agent, 16)
    await ntfy.wait_for(lambda got: len(got) == 2)
    assert titles(ntfy, "night")[1].startswith("Still: ")
    await until(
        lambda: notifications(agent, event_id=event_id, status="pending"), lambda ns: not ns
    )
    await minutes_pass(agent, 16)  # a second round
    await ntfy.wait_for(lambda got: len(got) == 3)

    history = await notifications(agent, event_id=event_id)
    resp = await agent.client.post(
        f"/api/v1/notifications/{history[0]['id']}/acknowledge", headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    acknowledged = await resp.json()
    assert acknowledged["acknowledged_by_email"] == "admin@farm.test"
    assert acknowledged["acknowledged_at"] is not None

    await minutes_pass(agent, 16)
    # The planner runs with every poll: rounds it would queue after an acknowledgement do not
    # appear, however long it runs (the table is checked after several of its runs).
    for _ in range(3):
        await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    await agent.client.app[NOTIFY_DELIVERER].drain()
    assert len(ntfy.received) == 3
    rounds = sorted((n["step"], n["round"]) for n in await notifications(agent, event_id=event_id))
    assert rounds == [("first", 0), ("repeat", 1), ("repeat", 2)]


async def test_repeats_stop_when_the_alert_clears(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(agent, farm_id, [contact["id"]], repeat_every_min=5)
    alert_id = await active_alert(agent, farm_id)
    event_id = await alert_event(agent, farm_id, alert_id)
    await until(
        lambda: notifications(agent, event_id=event_id),
        lambda ns: ns and ns[0]["status"] == "sent",
    )
    await agent.client.app[DATABASE].write(
        lambda conn: conn.execute("UPDATE alerts SET state = 'cleared' WHERE id = ?", (alert_id,))
    )
    await minutes_pass(agent, 6)
    for _ in range(3):
        await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    await agent.client.app[NOTIFY_DELIVERER].drain()
    assert len(await notifications(agent, event_id=event_id)) == 1
    assert len(ntfy.received) == 1


async def test_an_unacknowledged_alert_escalates_once_to_the_further_contact_point(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    first = await add_contact(agent, farm_id, ntfy.url("grower"))
    boss = await add_contact(agent, farm_id, ntfy.url("manager"), name="manager")
    await add_rule(agent, farm_id, [first["id"]], escalate_after_min=30, escalate_to=[boss["id"]])
    alert_id = await active_alert(agent, farm_id)
    event_id = await alert_event(agent, farm_id, alert_id)
    await ntfy.wait_for(lambda got: len(got) == 1)
    assert titles(ntfy, "manager") == []

    await minutes_pass(agent, 31)
    await ntfy.wait_for(lambda got: len(titles(ntfy, "manager")) == 1)
    assert titles(ntfy, "manager")[0].startswith("Escalated: ")
    await minutes_pass(agent, 31)
    for _ in range(3):
        await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    await agent.client.app[NOTIFY_DELIVERER].drain()
    assert len(titles(ntfy, "manager")) == 1
    steps = sorted(n["step"] for n in await notifications(agent, event_id=event_id))
    assert steps == ["escalation", "first"]


async def test_an_acknowledged_alert_does_not_escalate(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    first = await add_contact(agent, farm_id, ntfy.url("grower"))
    boss = await add_contact(agent, farm_id, ntfy.url("manager"), name="manager")
    await add_rule(agent, farm_id, [first["id"]], escalate_after_min=30, escalate_to=[boss["id"]])
    alert_id = await active_alert(agent, farm_id)
    event_id = await alert_event(agent, farm_id, alert_id)
    [sent] = await until(
        lambda: notifications(agent, event_id=event_id),
        lambda ns: ns and ns[0]["status"] == "sent",
    )
    resp = await agent.client.post(
        f"/api/v1/notifications/{sent['id']}/acknowledge", headers=agent.auth()
    )
    assert resp.status == 200
    await minutes_pass(agent, 31)
    for _ in range(3):
        await agent.client.app[NOTIFY_DELIVERER].run_once(plan=True)
    await agent.client.app[NOTIFY_DELIVERER].drain()
    assert titles(ntfy, "manager") == []


def _window_around_now() -> tuple[str, str, datetime]:
    local = datetime.now(ZoneInfo("UTC"))
    start = (local - timedelta(hours=1)).strftime("%H:%M")
    end_at = local + timedelta(hours=1)
    return start, end_at.strftime("%H:%M"), end_at


async def test_quiet_hours_hold_all_but_critical_messages_until_they_end(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    start, end, end_at = _window_around_now()
    contact = await add_contact(agent, farm_id, ntfy.url(), quiet_start=start, quiet_end=end)
    await add_rule(
        agent, farm_id, [contact["id"]], kinds=["alert_raised"], severities=["warning", "critical"]
    )

    held = await record_event(agent, farm_id, severity="warning", message="warm, not urgent")
    await record_event(agent, farm_id, severity="critical", message="pump stopped")

    await ntfy.wait_for(lambda got: len(got) == 1)
    assert "pump stopped" in ntfy.received[0].message
    [waiting] = await until(
        lambda: notifications(agent, event_id=held),
        lambda ns: ns and ns[0]["next_attempt_at"] > iso(datetime.now(UTC)),
    )
    assert waiting["status"] == "pending" and waiting["attempts"] == 0
    due: Any = datetime.fromisoformat(waiting["next_attempt_at"].replace("Z", "+00:00"))
    assert abs((due - end_at.replace(second=0, microsecond=0)).total_seconds()) < 1


async def test_an_event_without_a_lasting_condition_escalates_until_acknowledged(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    # Retries slower than the planner's runs: the escalation waits through several of them.
    agent = await make_agent(**{**FAST, "notify_retry_initial_s": 1.5, "notify_retry_max_s": 1.5})
    farm_id = await create_farm(agent)
    first = await add_contact(agent, farm_id, ntfy.url("grower"))
    boss = await add_contact(agent, farm_id, ntfy.url("manager"), name="manager")
    await add_rule(
        agent,
        farm_id,
        [first["id"]],
        kinds=["sync_stuck"],
        severities=["critical"],
        escalate_after_min=60,
        escalate_to=[boss["id"]],
    )
    event_id = await record_event(
        agent, farm_id, kind="sync_stuck", message="Cloud sync stuck", data={}
    )
    await ntfy.wait_for(lambda got: len(got) == 1)
    ntfy.failures = [503]  # the manager's service is down at first
    await minutes_pass(agent, 61)
    await ntfy.wait_for(lambda got: len(titles(ntfy, "manager")) == 1)
    assert "Cloud sync stuck" in titles(ntfy, "manager")[0]
    steps = sorted(n["step"] for n in await notifications(agent, event_id=event_id))
    assert steps == ["escalation", "first"]
