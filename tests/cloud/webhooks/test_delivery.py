"""Cloud deliveries: events arriving from agents' sync batches reach the farm's webhooks signed,
failures are retried, the address policy is checked again where the post connects, and two
cloud instances sharing the database never post one delivery twice."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from cloud.web.keys import WEBHOOK_DELIVERER
from tests.agent.runtime.conftest import eventually
from tests.cloud.webhooks.conftest import (
    FAST,
    Cloud,
    Conn,
    World,
    add_webhook,
    auth,
    insert_events,
)
from tests.support.webhook_receiver import WebhookReceiver


async def deliveries_of(cloud: Cloud, token: str, webhook_id: str) -> list[dict[str, Any]]:
    """GET /webhooks/{id}/deliveries."""
    status, body = await cloud.get(f"/api/v1/webhooks/{webhook_id}/deliveries", token)
    assert status == 200, body
    found: list[dict[str, Any]] = body["deliveries"]
    return found


async def test_a_synced_alert_reaches_the_farms_webhook_signed(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    cloud: Cloud = await make_cloud(**FAST)
    alice = await cloud.login(World.email("alice"))
    webhook = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    (event_id,) = await insert_events(system, world.farm_a.farm_id, 1)
    await insert_events(system, world.farm_b.farm_id, 1)  # another farm
    await insert_events(system, world.farm_a.farm_id, 1, kind="command_failed")  # no type
    await receiver.wait_for(1)
    await asyncio.sleep(0.3)  # a message that should not come would have come by now

    (message,) = receiver.received
    assert receiver.rejected == 0
    assert message.body["type"] == "alert.raised"
    assert message.body["data"]["event_id"] == str(event_id)
    assert message.body["data"]["details"] == {"metric": "temperature", "threshold": 30.0}

    async def delivered() -> list[dict[str, Any]]:
        found = await deliveries_of(cloud, alice, webhook["id"])
        return found if found and found[0]["status"] == "delivered" else []

    (delivery,) = await eventually(delivered)
    assert delivery["id"] == message.id and delivery["attempts"] == 1
    assert delivery["last_status_code"] == 204 and delivery["next_attempt_at"] is None


async def test_a_failure_is_retried_with_the_same_id(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    cloud: Cloud = await make_cloud(**FAST)
    alice = await cloud.login(World.email("alice"))
    webhook = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    receiver.failures = [500]
    await insert_events(system, world.farm_a.farm_id, 1)
    await receiver.wait_for(1)
    assert len(receiver.received) == 2 and len({m.id for m in receiver.received}) == 1

    async def delivered() -> list[dict[str, Any]]:
        found = await deliveries_of(cloud, alice, webhook["id"])
        return found if found and found[0]["status"] == "delivered" else []

    (delivery,) = await eventually(delivered)
    assert delivery["attempts"] == 2


async def test_a_harvest_and_a_webhook_whose_creator_lost_the_farm(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    cloud: Cloud = await make_cloud(**FAST)
    admin = await cloud.login(World.email("admin"))
    await add_webhook(
        cloud, admin, world.farm_a.farm_id, receiver, event_types=["grow_plan.harvested"]
    )
    plan = await system.fetchval(
        "INSERT INTO grow_plans (farm_id, name, species, status) VALUES ($1, 'Basil', 'basil',"
        " 'active') RETURNING id",
        world.farm_a.farm_id,
    )
    for _ in range(2):  # a replayed batch writes the same state again: one message
        await system.execute(
            "UPDATE grow_plans SET status = 'harvested', harvested_quantity = 2.5,"
            " harvest_unit = 'kg', ended_at = now() WHERE id = $1",
            plan,
        )
    await receiver.wait_for(1)
    await asyncio.sleep(0.3)
    (message,) = receiver.received
    assert message.body["type"] == "grow_plan.harvested"
    assert message.body["data"]["grow_plan_id"] == str(plan)
    assert message.body["data"]["harvested_quantity"] == 2.5

    # A webhook made by a farm manager who then loses the farm gets nothing more.
    other = WebhookReceiver()
    await other.start()
    try:
        will = world.users["will"]
        await system.execute("UPDATE users SET role = 'farm_manager' WHERE id = $1", will)
        token = await cloud.login(World.email("will"))
        await add_webhook(cloud, token, world.farm_a.farm_id, other)
        await system.execute(
            "DELETE FROM permissions WHERE user_id = $1 AND farm_id = $2",
            will,
            world.farm_a.farm_id,
        )
        await insert_events(system, world.farm_a.farm_id, 1)
        await asyncio.sleep(0.5)
        assert other.received == []
    finally:
        await other.stop()


async def test_delivery_checks_the_address_again_where_it_connects(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    # Made while the operator allowed private targets (no delivery loops in that instance),
    # delivered by an instance that refuses them: the post never reaches the receiver.
    lenient: Cloud = await make_cloud(**FAST, webhook_workers=0)
    alice = await lenient.login(World.email("alice"))
    webhook = await add_webhook(lenient, alice, world.farm_a.farm_id, receiver)
    strict: Cloud = await make_cloud(
        webhook_poll_s=0.05, webhook_retry_initial_s=3600, webhook_allow_private_targets=False
    )
    await insert_events(system, world.farm_a.farm_id, 1)

    async def tried() -> list[dict[str, Any]]:
        found = await deliveries_of(strict, alice, webhook["id"])
        return found if found and found[0]["attempts"] else []

    (delivery,) = await eventually(tried)
    assert delivery["status"] == "pending" and delivery["last_status_code"] is None
    assert "target refused" in delivery["last_error"] and "loopback" in delivery["last_error"]
    assert receiver.received == []


async def test_two_cloud_instances_never_post_one_delivery_twice(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    settings = {**FAST, "webhook_batch": 20, "webhook_workers": 3, "db_pool_max": 6}
    first: Cloud = await make_cloud(**settings)
    second: Cloud = await make_cloud(**settings)
    alice = await first.login(World.email("alice"))
    webhook = await add_webhook(first, alice, world.farm_a.farm_id, receiver)
    receiver.delay_s = 0.005  # posts overlap, so both instances are busy at once
    await insert_events(system, world.farm_a.farm_id, 400)
    await receiver.wait_for(400, timeout=60)
    await asyncio.sleep(0.3)
    assert sum(receiver.answered_ok.values()) == 400
    assert max(receiver.answered_ok.values()) == 1
    assert receiver.rejected == 0
    delivered = await system.fetchval(
        "SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'delivered'",
        uuid.UUID(webhook["id"]),
    )
    assert delivered == 400
    # Both instances took part (the work is shared through the database, not split up front).
    shares = [c.client.app[WEBHOOK_DELIVERER].delivered for c in (first, second)]
    assert sum(shares) == 400 and min(shares) > 0, shares


async def test_settled_deliveries_go_after_the_retention(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    cloud: Cloud = await make_cloud(**FAST, webhook_delivery_retention_days=0.2 / 86_400)
    alice = await cloud.login(World.email("alice"))
    webhook = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    await insert_events(system, world.farm_a.farm_id, 3)
    await receiver.wait_for(3)

    async def delivered() -> bool:
        found = await deliveries_of(cloud, alice, webhook["id"])
        return len(found) == 3 and {d["status"] for d in found} == {"delivered"}

    await eventually(delivered)
    await asyncio.sleep(0.3)
    assert await cloud.client.app[WEBHOOK_DELIVERER].prune_once() == 3
    assert await deliveries_of(cloud, alice, webhook["id"]) == []


async def test_a_webhook_failing_too_long_is_disabled_with_an_event(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    cloud: Cloud = await make_cloud(**FAST, webhook_disable_after_s=0.5)
    alice = await cloud.login(World.email("alice"))
    webhook = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    receiver.failures = [503] * 1000
    await insert_events(system, world.farm_a.farm_id, 1)

    async def disabled() -> dict[str, Any] | None:
        status, body = await cloud.get(f"/api/v1/webhooks/{webhook['id']}", alice)
        assert status == 200
        return None if body["enabled"] else body

    state = await eventually(disabled)
    assert "every delivery failed since" in state["disabled_reason"]
    (delivery,) = await deliveries_of(cloud, alice, webhook["id"])
    assert delivery["status"] == "failed" and delivery["last_status_code"] == 503
    event = await system.fetchrow(
        "SELECT severity, data FROM events WHERE kind = 'webhook_disabled' AND farm_id = $1",
        world.farm_a.farm_id,
    )
    assert event is not None and event["severity"] == "warning"
    assert webhook["id"] in event["data"]

    # Enabled again by its manager, it starts afresh and delivers what comes next.
    receiver.failures.clear()
    body = {"url": receiver.url, "event_types": ["alert.raised"], "enabled": True}
    resp = await cloud.client.put(
        f"/api/v1/webhooks/{webhook['id']}", json=body, headers=auth(alice)
    )
    again = await resp.json()
    assert again["enabled"] and again["failing_since"] is None and again["disabled_reason"] is None
    await insert_events(system, world.farm_a.farm_id, 1)
    await receiver.wait_for(1)


async def test_a_farm_creators_webhook_follows_the_grant_an_admin_reduced(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    """Creating the farm is no access of its own (cloud migrations 0075, 0076): once an admin
    reduces the creator's grant to read_only, their webhook is queued nothing more."""
    cloud: Cloud = await make_cloud(**FAST)
    alice = await cloud.login(World.email("alice"))  # farm manager, farm A's creator
    hook = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    queued = "SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1"
    await insert_events(system, world.farm_a.farm_id, 1)
    assert await system.fetchval(queued, uuid.UUID(hook["id"])) == 1
    admin = await cloud.login(World.email("admin"))
    resp = await cloud.client.post(
        "/api/v1/users/permissions",
        json={
            "user_id": str(world.users["alice"]),
            "permissions": [{"farm_id": str(world.farm_a.farm_id), "permission_type": "read_only"}],
        },
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert resp.status == 200, await resp.text()
    await insert_events(system, world.farm_a.farm_id, 1)
    assert await system.fetchval(queued, uuid.UUID(hook["id"])) == 1
