"""Deliveries from the agent's outbox: signed as Standard Webhooks, retried after a failure with
the same webhook-id, never following a redirect, and a webhook that keeps failing disabled with
an event saying so."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agent.web.keys import DATABASE, EVENT_LOG, WEBHOOK_DELIVERER
from protocol.timefmt import now_iso
from tests.agent.alerts.conftest import events_of
from tests.agent.devices_api.conftest import create_farm
from tests.agent.runtime.conftest import eventually
from tests.agent.webhooks.conftest import FAST, add_webhook, deliveries_of, raise_alert
from tests.conftest import Agent, AgentFactory
from tests.support.webhook_receiver import WebhookReceiver


async def test_an_alert_reaches_the_receiver_signed_and_is_logged_as_delivered(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    webhook = await add_webhook(agent, farm_id, receiver)
    event_id = await raise_alert(agent, farm_id)
    await receiver.wait_for(1)

    message = receiver.received[0]
    assert receiver.rejected == 0  # the reference library verified the signature
    assert message.body["type"] == "alert.raised"
    assert message.body["data"]["event_id"] == event_id
    assert message.body["data"]["farm_id"] == farm_id
    assert message.body["data"]["details"]["raised_value"] == 35.0
    assert message.headers["content-type"] == "application/json"

    async def logged() -> list[dict[str, Any]]:
        found = await deliveries_of(agent, webhook["id"])
        return found if found and found[0]["status"] == "delivered" else []

    (delivery,) = await eventually(logged)
    assert delivery["id"] == message.id
    assert delivery["attempts"] == 1 and delivery["last_status_code"] == 204
    assert delivery["event_type"] == "alert.raised" and delivery["event_id"] == event_id
    assert delivery["next_attempt_at"] is None and delivery["delivered_at"]


async def test_only_subscribed_types_of_the_webhooks_own_farm_are_delivered(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    other_farm = await create_farm(agent, "South")
    webhook = await add_webhook(agent, farm_id, receiver, event_types=["device.offline"])
    await raise_alert(agent, farm_id)  # not subscribed
    await raise_alert(agent, other_farm)  # another farm
    log = agent.client.app[EVENT_LOG]
    log.record(farm_id, None, "device_offline", "warning", "Device went offline", {})
    await log.flush()
    await receiver.wait_for(1)
    await asyncio.sleep(0.3)  # a second message, if one were queued, would have come by now
    assert [m.body["type"] for m in receiver.received] == ["device.offline"]
    assert len(await deliveries_of(agent, webhook["id"])) == 1


async def test_a_receiver_failure_is_retried_with_the_same_id_until_it_succeeds(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    webhook = await add_webhook(agent, farm_id, receiver)
    receiver.failures = [500, 503]
    await raise_alert(agent, farm_id)
    await receiver.wait_for(1)

    assert len(receiver.received) == 3
    assert len({m.id for m in receiver.received}) == 1  # one webhook-id across the retries
    assert receiver.rejected == 0

    async def settled() -> list[dict[str, Any]]:
        found = await deliveries_of(agent, webhook["id"], status="delivered")
        return found

    (delivery,) = await eventually(settled)
    assert delivery["attempts"] == 3 and delivery["last_status_code"] == 204
    resp = await agent.client.get(f"/api/v1/webhooks/{webhook['id']}", headers=agent.auth())
    health = await resp.json()
    assert health["failing_since"] is None and health["consecutive_failures"] == 0
    assert health["last_success_at"] and health["last_failure_at"]

    metrics = await (await agent.client.get("/metrics")).text()
    assert "farm_agent_webhook_deliveries_total 1.0" in metrics
    assert "farm_agent_webhook_failed_attempts_total 2.0" in metrics
    assert "farm_agent_webhook_pending 0.0" in metrics


async def test_a_failing_delivery_shows_its_attempts_and_next_attempt(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(webhook_poll_s=0.05, webhook_retry_initial_s=3600)
    farm_id = await create_farm(agent)
    webhook = await add_webhook(agent, farm_id, receiver)
    receiver.failures = [500]
    await raise_alert(agent, farm_id)

    async def tried() -> list[dict[str, Any]]:
        found = await deliveries_of(agent, webhook["id"])
        return found if found and found[0]["attempts"] == 1 else []

    (delivery,) = await eventually(tried)
    assert delivery["status"] == "pending"
    assert delivery["last_status_code"] == 500 and delivery["last_error"] == "HTTP 500"
    assert delivery["next_attempt_at"] > delivery["last_attempt_at"]


async def test_a_redirect_is_not_followed(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(webhook_poll_s=0.05, webhook_retry_initial_s=3600)
    farm_id = await create_farm(agent)
    redirecting = receiver.url.replace("/hook", "/redirect")
    webhook = await add_webhook(agent, farm_id, receiver, url=redirecting)
    await raise_alert(agent, farm_id)

    async def tried() -> list[dict[str, Any]]:
        found = await deliveries_of(agent, webhook["id"])
        return found if found and found[0]["attempts"] == 1 else []

    (delivery,) = await eventually(tried)
    assert delivery["status"] == "pending" and delivery["last_status_code"] == 302
    assert receiver.received == []


async def test_a_webhook_failing_too_long_is_disabled_with_an_event(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST, webhook_disable_after_s=0.5)
    farm_id = await create_farm(agent)
    watcher = WebhookReceiver()
    await watcher.start()
    try:
        failing = await add_webhook(agent, farm_id, receiver)
        watching = await add_webhook(agent, farm_id, watcher, event_types=["webhook.disabled"])
        receiver.failures = [500] * 1000
        await raise_alert(agent, farm_id)

        async def disabled() -> dict[str, Any] | None:
            resp = await agent.client.get(f"/api/v1/webhooks/{failing['id']}", headers=agent.auth())
            body: dict[str, Any] = await resp.json()
            return body if not body["enabled"] else None

        state = await eventually(disabled)
        assert "every delivery failed since" in state["disabled_reason"]
        assert state["consecutive_failures"] >= 2
        (delivery,) = await deliveries_of(agent, failing["id"])
        assert delivery["status"] == "failed" and "webhook disabled" in delivery["last_error"]

        _, events = await events_of(agent, farm_id=farm_id, kind="webhook_disabled")
        (event,) = events["events"]
        assert event["data"]["webhook_id"] == failing["id"]
        assert event["severity"] == "warning"
        # The event is itself a system event other webhooks of the farm may subscribe to.
        await watcher.wait_for(1)
        assert watcher.received[0].body["type"] == "webhook.disabled"
        assert watcher.received[0].body["data"]["details"]["webhook_id"] == failing["id"]
        assert watching["id"] != failing["id"]

        # Nothing more is attempted while it is disabled.
        tried = len(receiver.received)
        await raise_alert(agent, farm_id)
        await asyncio.sleep(0.3)
        assert len(receiver.received) == tried
    finally:
        await watcher.stop()


async def test_the_test_endpoint_sends_a_signed_test_message(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    webhook = await add_webhook(agent, farm_id, receiver, event_types=["device.online"])
    resp = await agent.client.post(f"/api/v1/webhooks/{webhook['id']}/test", headers=agent.auth())
    assert resp.status == 202, await resp.text()
    queued = await resp.json()
    assert queued["status"] == "pending" and queued["event_type"] == "webhook.test"
    await receiver.wait_for(1)
    assert receiver.received[0].id == queued["id"]
    assert receiver.received[0].body["type"] == "webhook.test"
    assert receiver.received[0].body["data"]["webhook_id"] == webhook["id"]
    assert receiver.rejected == 0


async def test_a_harvested_grow_plan_is_a_harvest_notification(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    await add_webhook(agent, farm_id, receiver, event_types=["grow_plan.harvested"])
    plan_id = str(uuid.uuid4())
    stamp = now_iso()
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "INSERT INTO grow_plans (id, farm_id, species, species_name, custom, plant_count,"
            " start_date, stages, total_days, status, created_at, updated_at)"
            " VALUES (?, ?, 'basil', 'Basil', 0, 10, '2026-01-01', '[]', 30, 'active', ?, ?)",
            (plan_id, farm_id, stamp, stamp),
        )
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "UPDATE grow_plans SET status = 'harvested', harvested_quantity = 1.5,"
            " harvest_unit = 'kg', ended_at = ? WHERE id = ?",
            (stamp, plan_id),
        )
    await receiver.wait_for(1)
    body = receiver.received[0].body
    assert body["type"] == "grow_plan.harvested"
    assert body["data"]["grow_plan_id"] == plan_id
    assert body["data"]["harvested_quantity"] == 1.5 and body["data"]["harvest_unit"] == "kg"


async def test_settled_deliveries_go_after_the_retention_and_pending_ones_stay(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(
        webhook_poll_s=0.05,
        webhook_retry_initial_s=3600,
        webhook_delivery_retention_days=0.2 / 86_400,  # 0.2 s
    )
    farm_id = await create_farm(agent)
    webhook = await add_webhook(agent, farm_id, receiver)
    await raise_alert(agent, farm_id)
    await receiver.wait_for(1)
    receiver.failures = [500]
    await raise_alert(agent, farm_id)

    async def settled() -> list[dict[str, Any]]:
        found = await deliveries_of(agent, webhook["id"])
        return found if {d["attempts"] for d in found} == {1} and len(found) == 2 else []

    await eventually(settled)
    await asyncio.sleep(0.3)
    assert await agent.client.app[WEBHOOK_DELIVERER].prune_once() == 1
    (left,) = await deliveries_of(agent, webhook["id"])
    assert left["status"] == "pending" and left["last_status_code"] == 500


async def test_a_farm_status_change_through_the_api_is_a_system_event(
    make_agent: AgentFactory, receiver: WebhookReceiver
) -> None:
    agent: Agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    await add_webhook(agent, farm_id, receiver, event_types=["farm.status_changed"])
    resp = await agent.client.put(
        f"/api/v1/farms/{farm_id}", json={"status": "maintenance"}, headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    await receiver.wait_for(1)
    body = receiver.received[0].body
    assert body["type"] == "farm.status_changed"
    assert body["data"]["details"] == {"status": "maintenance", "previous_status": "active"}
