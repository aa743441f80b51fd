"""Sync jobs against the fake provider: full then incremental pulls of 10,000+ orders across
pages with a 429 and a 500 on the way, each object once; a revoked token stops the job with a
clear error; one live job per configuration and kind."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from cloud.pos_provider.fake import Fault
from tests.cloud.conftest import CloudDatabase
from tests.cloud.pos.conftest import TOKEN, FakeProvider, Owners, config_body, wait_for
from tests.cloud.seed import add_user

ORDERS_PATH = "/v2/orders/search"


async def start_sync(owners: Owners, kind: str, config_id: str, who: str = "alice") -> str:
    status, started = await owners.call(who, "POST", f"/api/v1/pos/sync/{kind}/{config_id}")
    assert status == 202, started
    job_id: str = started["job_id"]
    return job_id


async def finished_job(owners: Owners, config_id: str, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = {}

    async def done() -> bool:
        nonlocal job
        status, body = await owners.call("alice", "GET", f"/api/v1/pos/sync/status/{config_id}")
        assert status == 200, body
        job = next(j for j in body["jobs"] if j["id"] == job_id)
        return job["state"] in ("succeeded", "failed")

    await wait_for(done, f"job {job_id}", limit_s=240)
    return job


async def mirrored(cloud_db: CloudDatabase, resource: str) -> dict[str, dict[str, Any]]:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT object_id, data::text AS data FROM pos_objects WHERE resource = $1", resource
        )
    finally:
        await conn.close(timeout=10)

    return {r["object_id"]: json.loads(r["data"]) for r in rows}


def order_requests(fake: FakeProvider) -> int:
    return sum(1 for _, path in fake.merchant.requests if path == ORDERS_PATH)


async def test_full_then_incremental_sync_of_ten_thousand_orders_exactly_once(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    fake.merchant.add_orders(10_000, "L002")
    total = len(fake.merchant.orders)
    fake.merchant.faults += [
        Fault(ORDERS_PATH, 429, after=3),
        Fault(ORDERS_PATH, 500, after=6),
    ]
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    job = await finished_job(owners, config["id"], await start_sync(owners, "orders", config["id"]))
    assert job["state"] == "succeeded", job
    pages = math.ceil(total / 1000)
    assert job["progress"]["orders"] == {"pages": pages, "records": total}
    assert order_requests(fake) == pages + 2  # each page once, plus the two refused tries
    orders = await mirrored(cloud_db, "orders")
    assert set(orders) == {o["id"] for o in fake.merchant.orders}

    status, page = await owners.call(
        "alice", "GET", "/api/v1/pos/orders", config_id=config["id"], limit=5
    )
    assert status == 200 and page["total"] == total and len(page["orders"]) == 5
    assert page["last_synced_at"] is not None

    # Incremental: new and changed orders only, from the high-water mark on.
    fake.merchant.add_orders(300)
    changed = [fake.merchant.update_order(0) for _ in range(5)]
    before = order_requests(fake)
    job = await finished_job(owners, config["id"], await start_sync(owners, "orders", config["id"]))
    assert job["state"] == "succeeded", job
    assert order_requests(fake) - before == 1
    assert 305 <= job["progress"]["orders"]["records"] <= 306  # the mark itself is re-read
    orders = await mirrored(cloud_db, "orders")
    assert len(orders) == total + 300
    for order in changed:
        assert orders[order["id"]]["version"] == order["version"]
        assert orders[order["id"]]["state"] == order["state"]


async def test_a_first_pull_keeps_the_newer_version_a_webhook_mirrored_first(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    # The first pull inserts its pages without ON CONFLICT; an order a webhook event brought
    # first is met on the second page, which is then upserted, as are the pages after it.
    fake.merchant.add_orders(2_500)
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    newer, older = fake.merchant.orders[1_200], fake.merchant.orders[2_100]
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        for order, version, updated in ((newer, 9, "2030-01-01T00:00:00Z"), (older, 0, None)):
            await conn.execute(
                "INSERT INTO pos_objects (config_id, owner_id, resource, object_id, updated_at,"
                " data) VALUES ($1, $2, 'orders', $3, $4::text::timestamptz, $5::text::json)",
                UUID(config["id"]),
                owners.ids["alice"],
                order["id"],
                updated or "2025-01-01T00:00:00Z",
                json.dumps({**order, "version": version}),
            )
    finally:
        await conn.close(timeout=10)
    job = await finished_job(owners, config["id"], await start_sync(owners, "orders", config["id"]))
    assert job["state"] == "succeeded", job
    orders = await mirrored(cloud_db, "orders")
    assert set(orders) == {o["id"] for o in fake.merchant.orders}
    assert orders[newer["id"]]["version"] == 9  # the webhook's newer version stays
    assert orders[older["id"]]["version"] == older["version"]  # the pull's newer one replaced it


async def test_an_expired_token_fails_the_job_at_once_with_the_providers_reason(
    owners: Owners, fake: FakeProvider
) -> None:
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    fake.merchant.tokens[TOKEN] = datetime.now(UTC) - timedelta(seconds=1)
    job = await finished_job(
        owners, config["id"], await start_sync(owners, "customers", config["id"])
    )
    assert job["state"] == "failed"
    assert "ACCESS_TOKEN_EXPIRED" in job["error"] and "access token" in job["error"]
    assert TOKEN not in job["error"]
    assert job["attempts"] == 1
    assert sum(1 for _, path in fake.merchant.requests if path == "/v2/customers") == 1


async def test_one_live_job_per_configuration_and_kind(owners: Owners, fake: FakeProvider) -> None:
    fake.merchant.delay_s = 0.2
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    first = await start_sync(owners, "all", config["id"])
    assert await start_sync(owners, "all", config["id"]) == first
    other = await start_sync(owners, "customers", config["id"])
    assert other != first
    fake.merchant.delay_s = 0
    assert (await finished_job(owners, config["id"], first))["state"] == "succeeded"
    assert (await finished_job(owners, config["id"], other))["state"] == "succeeded"
    again = await start_sync(owners, "all", config["id"])
    assert again != first


async def test_an_active_configuration_is_synced_on_schedule(
    pos_cloud: Any, fake: FakeProvider, system: Any, password_hash: str
) -> None:
    cloud = await pos_cloud(pos_sync_interval_s=0.5)
    await add_user(system, "sam@example.com", "farm_manager")
    await system.execute("UPDATE users SET password_hash = $1", password_hash)
    token = await cloud.login("sam@example.com")
    headers = {"Authorization": f"Bearer {token}"}
    resp = await cloud.client.post("/api/v1/pos/configs", json=config_body(fake), headers=headers)
    config = await resp.json()
    await cloud.client.put(f"/api/v1/pos/configs/{config['id']}/activate", headers=headers)

    async def scheduled() -> bool:
        status, body = await cloud.get(f"/api/v1/pos/sync/status/{config['id']}", token)
        assert status == 200
        return any(j["trigger"] == "schedule" and j["state"] == "succeeded" for j in body["jobs"])

    await wait_for(scheduled, "a scheduled sync")
    _, page = await cloud.get("/api/v1/pos/orders", token)
    assert page["total"] == len(fake.merchant.orders)
