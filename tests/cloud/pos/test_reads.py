"""The POS reads come from the mirror: every resource after a full sync, paged, filtered by
location and time, with the time of the last pull, and still answered when the provider is
down."""

from __future__ import annotations

from cloud.pos_provider.fake import Fault
from tests.cloud.api.conftest import assert_error
from tests.cloud.pos.conftest import FakeProvider, Owners, config_body
from tests.cloud.pos.test_sync_jobs import finished_job, start_sync

RESOURCES = {
    "locations": "locations",
    "products": "products",
    "customers": "customers",
    "orders": "orders",
    "payments": "payments",
    "refunds": "refunds",
    "disputes": "disputes",
    "payouts": "payouts",
    "team-members": "team_members",
    "inventory": "inventory",
}


async def test_every_resource_is_read_from_the_mirror(owners: Owners, fake: FakeProvider) -> None:
    fake.merchant.add_orders(40, "L002")
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    status, body = await owners.call("alice", "GET", "/api/v1/pos/orders")
    assert status == 404  # no active configuration yet
    assert_error(body, "RESOURCE_NOT_FOUND")
    await owners.call("alice", "PUT", f"/api/v1/pos/configs/{config['id']}/activate")
    job = await finished_job(owners, config["id"], await start_sync(owners, "all", config["id"]))
    assert job["state"] == "succeeded", job

    # The provider goes down: the reads do not notice.
    for path in ("/v2/orders/search", "/v2/locations", "/v2/customers"):
        fake.merchant.faults.append(Fault(path, 500, times=1000))
    expected = {
        "locations": 2,
        "products": 2,
        "customers": 5,
        "orders": 65,
        "payments": 65,
        "refunds": 0,
        "disputes": 1,
        "payouts": 1,
        "team-members": 5,
        "inventory": 1,
    }
    for path, key in RESOURCES.items():
        status, page = await owners.call("alice", "GET", f"/api/v1/pos/{path}")
        assert status == 200, (path, page)
        assert page["total"] == expected[path], path
        assert len(page[key]) == min(50, expected[path])
        assert page["last_synced_at"] is not None, path

    _, page = await owners.call("alice", "GET", "/api/v1/pos/orders", location_id="L002", limit=500)
    assert page["total"] == 40 and {o["location_id"] for o in page["orders"]} == {"L002"}
    newest = page["orders"][0]["created_at"]
    _, since = await owners.call("alice", "GET", "/api/v1/pos/orders", begin_time=newest)
    assert since["total"] == 1 and since["orders"][0]["created_at"] == newest
    _, paged = await owners.call("alice", "GET", "/api/v1/pos/orders", limit=10, offset=60)
    assert len(paged["orders"]) == 5

    status, body = await owners.call(
        "alice",
        "GET",
        "/api/v1/pos/orders",
        begin_time="2026-02-01T00:00:00Z",
        end_time="2026-01-01T00:00:00Z",
    )
    assert status == 422
    assert_error(body, "VALIDATION_ERROR")
    status, body = await owners.call("alice", "GET", "/api/v1/pos/orders", limit=501)
    assert status == 422
    status, _ = await owners.call("bob", "GET", "/api/v1/pos/orders", config_id=config["id"])
    assert status == 404
