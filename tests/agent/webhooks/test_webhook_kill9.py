"""kill -9 of the agent in the middle of delivering: after a restart every delivery reaches the
receiver, and a webhook-id comes twice only if the receiver had answered it 2xx before the kill
(the agent had not committed the answer yet): a receiver deduping on webhook-id sees each once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.agent_process import AgentProcess
from tests.support.webhook_receiver import WebhookReceiver, delivery_states, seed_alert_events

EVENTS = 1500
ENV = {
    "FARM_MQTT_ENABLED": "false",
    "FARM_SERIAL_ENABLED": "false",
    "FARM_WEBHOOK_POLL_S": "0.05",
    "FARM_WEBHOOK_RETRY_INITIAL_S": "0.05",
    "FARM_WEBHOOK_RETRY_MAX_S": "0.2",
    "FARM_WEBHOOK_WORKERS": "4",
    "FARM_WEBHOOK_BATCH": "25",
}


async def test_every_delivery_arrives_once_per_id_across_a_kill_9(tmp_path: Path) -> None:
    receiver = WebhookReceiver(delay_s=0.002)
    await receiver.start()
    agent = AgentProcess(tmp_path / "state", ENV)
    try:
        await agent.start()
        farm = await agent.post("/api/v1/farms/", {"name": "North"})
        webhook = await agent.post(
            "/api/v1/webhooks",
            {"farm_id": farm["id"], "url": receiver.url, "event_types": ["alert.raised"]},
        )
        receiver.secret = webhook["secret"]
        agent.stop()
        database = agent.state / "agent.db"
        seed_alert_events(database, farm["id"], EVENTS)
        queued = set(delivery_states(database))
        assert len(queued) == EVENTS

        await agent.start()
        await receiver.wait_for(EVENTS // 3, timeout=120)
        agent.kill()
        # Requests already read by the receiver finish their handlers (its answers go nowhere).
        await asyncio.sleep(0.5)
        answered_before_kill = set(receiver.answered_ok)
        assert len(answered_before_kill) < EVENTS  # the kill came mid-run

        await agent.start()
        await receiver.wait_for_ids(queued, timeout=120)
        agent.stop()

        assert receiver.rejected == 0  # every message verified
        resent = {i for i, n in receiver.answered_ok.items() if n > 1}
        # Only posts in flight at the kill (answered, not yet committed) come again...
        assert resent <= answered_before_kill
        assert len(resent) <= 4 * 25
        # ...and the agent's log holds every one as delivered.
        assert set(delivery_states(database).values()) == {"delivered"}
    finally:
        agent.kill()
        await receiver.stop()
