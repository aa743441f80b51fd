"""kill -9 of the agent in the middle of sending notifications: after a restart every queued
notification reaches the receiver, and one comes twice only if it was in flight at the kill
(the service took it, the agent had not committed that yet)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from tests.support.agent_process import AgentProcess
from tests.support.ntfy_receiver import NtfyReceiver
from tests.support.webhook_receiver import seed_alert_events

EVENTS = 240
BATCH = 16
ENV = {
    "FARM_MQTT_ENABLED": "false",
    "FARM_SERIAL_ENABLED": "false",
    "FARM_NOTIFY_POLL_S": "0.05",
    "FARM_NOTIFY_RETRY_INITIAL_S": "0.05",
    "FARM_NOTIFY_RETRY_MAX_S": "0.2",
    "FARM_NOTIFY_BATCH": str(BATCH),
    "FARM_NOTIFY_PUBLIC_URL": "http://farm.local",
}


def notification_states(database: Path) -> dict[str, str]:
    """Every notification's event id and status in an agent's database."""
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn:
        return dict(conn.execute("SELECT event_id, status FROM notifications").fetchall())


async def test_every_notification_arrives_across_a_kill_9_and_only_in_flight_ones_twice(
    tmp_path: Path,
) -> None:
    ntfy = NtfyReceiver()
    await ntfy.start()
    agent = AgentProcess(tmp_path / "state", ENV)
    try:
        await agent.start()
        farm = await agent.post("/api/v1/farms/", {"name": "North"})
        contact = await agent.post(
            "/api/v1/contact-points",
            {"farm_id": farm["id"], "name": "night", "url": ntfy.url("night")},
        )
        await agent.post(
            "/api/v1/notification-rules",
            {
                "farm_id": farm["id"],
                "event_kinds": ["alert_raised"],
                "contact_point_ids": [contact["id"]],
            },
        )
        agent.stop()
        database = agent.state / "agent.db"
        seed_alert_events(database, farm["id"], EVENTS)
        queued = set(notification_states(database))
        assert len(queued) == EVENTS  # queued with the events, in their transaction

        await agent.start()
        await ntfy.wait_for(lambda got: len(got) >= EVENTS // 3, within=120)
        agent.kill()
        assert len(ntfy.by_event) < EVENTS  # the kill came mid-run

        await agent.start()
        await ntfy.wait_for(lambda _: set(ntfy.by_event) >= queued, within=120)
        agent.stop()

        assert set(ntfy.by_event) == queued
        twice = [event for event, n in ntfy.by_event.items() if n > 1]
        assert max(ntfy.by_event.values()) <= 2
        assert len(twice) <= BATCH  # at most what was in flight at the kill
        assert set(notification_states(database).values()) == {"sent"}
    finally:
        agent.kill()
        await ntfy.stop()
