"""The provider's webhook: a signature over notification URL + raw body with the configuration's
key is required; tampered bodies, another URL, no signature and oversized bodies are refused in
the envelope and change nothing; a replayed event is dropped; accepted events reach the mirror."""

from __future__ import annotations

import io
import json
from typing import Any

import aiohttp
import asyncpg

from cloud.pos_provider.fake import send_event, webhook_event
from cloud.pos_provider.signature import SIGNATURE_HEADER, sign
from tests.cloud.api.conftest import assert_error
from tests.cloud.conftest import CloudDatabase
from tests.cloud.pos.conftest import FakeProvider, Owners, config_body, wait_for

KEY = "whsec-fake-signature-key"
NOTIFICATION_URL = "https://cloud.example/api/v1/pos/webhook"


async def connected_config(owners: Owners, fake: FakeProvider) -> dict[str, Any]:
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    status, result = await owners.call(
        "alice", "POST", "/api/v1/pos/test-connection", {"config_id": config["id"]}
    )
    assert status == 200 and result["ok"]  # the merchant id now routes events to the config
    await owners.call("alice", "PUT", f"/api/v1/pos/configs/{config['id']}/activate")
    return config


async def stored_events(cloud_db: CloudDatabase) -> int:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM pos_webhook_events")
        return count
    finally:
        await conn.close(timeout=10)


async def post_raw(owners: Owners, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    resp = await owners.cloud.client.post(
        "/api/v1/pos/webhook",
        data=io.BytesIO(body),
        headers={"Content-Type": "application/json", **headers},
    )
    return resp.status, await resp.json()


def payment(amount: int = 500, updated: str = "2026-02-01T00:00:00.000Z") -> dict[str, Any]:
    return {
        "id": "PWEBHOOK1",
        "location_id": "L001",
        "status": "COMPLETED",
        "amount_money": {"amount": amount, "currency": "USD"},
        "created_at": "2026-02-01T00:00:00.000Z",
        "updated_at": updated,
    }


async def test_a_signed_event_is_accepted_once_and_applied(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    await connected_config(owners, fake)
    url = str(owners.cloud.client.make_url("/api/v1/pos/webhook"))
    event = webhook_event(fake.merchant.merchant_id, "payment.updated", payment())
    assert await send_event(url, NOTIFICATION_URL, KEY, event) == 200

    async def applied() -> bool:
        _, page = await owners.call("alice", "GET", "/api/v1/pos/payments", limit=500)
        return any(p["id"] == "PWEBHOOK1" for p in page["payments"])

    await wait_for(applied, "the payment event")
    # The provider retries deliveries: the same event again is acknowledged and dropped.
    body = json.dumps(event).encode()
    status, ack = await post_raw(
        owners, body, {SIGNATURE_HEADER: sign(KEY, NOTIFICATION_URL, body)}
    )
    assert status == 200 and ack == {"received": True, "duplicate": True}
    assert await stored_events(cloud_db) == 1


async def test_bad_signatures_are_refused_and_change_nothing(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    await connected_config(owners, fake)
    event = webhook_event(fake.merchant.merchant_id, "payment.updated", payment())
    body = json.dumps(event).encode()
    good = sign(KEY, NOTIFICATION_URL, body)
    tampered = body.replace(b'"amount": 500', b'"amount": 50000')
    cases = [
        (body, {}, 401, "UNAUTHORIZED"),
        (tampered, {SIGNATURE_HEADER: good}, 403, "FORBIDDEN"),
        (
            body,
            {SIGNATURE_HEADER: sign(KEY, "https://elsewhere.example/hook", body)},
            403,
            "FORBIDDEN",
        ),
        (body, {SIGNATURE_HEADER: sign("another-key", NOTIFICATION_URL, body)}, 403, "FORBIDDEN"),
        (body, {SIGNATURE_HEADER: "not base64 at all"}, 403, "FORBIDDEN"),
    ]
    for raw, headers, expected, code in cases:
        status, answer = await post_raw(owners, raw, headers)
        assert status == expected, (headers, answer)
        assert_error(answer, code)
    assert await stored_events(cloud_db) == 0


async def test_malformed_and_oversized_bodies_are_refused(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    await connected_config(owners, fake)
    garbage = b"{not json"
    status, answer = await post_raw(
        owners, garbage, {SIGNATURE_HEADER: sign(KEY, NOTIFICATION_URL, garbage)}
    )
    assert status == 400
    assert_error(answer, "BAD_REQUEST")
    huge = json.dumps({"merchant_id": fake.merchant.merchant_id, "pad": "x" * (1024 * 1024)})
    status, answer = await post_raw(
        owners, huge.encode(), {SIGNATURE_HEADER: sign(KEY, NOTIFICATION_URL, huge.encode())}
    )
    assert status == 413
    assert_error(answer, "PAYLOAD_TOO_LARGE")
    assert await stored_events(cloud_db) == 0


async def test_events_of_each_family_reach_the_mirror(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    config = await connected_config(owners, fake)
    url = str(owners.cloud.client.make_url("/api/v1/pos/webhook"))
    merchant = fake.merchant.merchant_id
    customer = {
        "id": "CWEB",
        "given_name": "Web",
        "created_at": "2026-02-01T00:00:00Z",
        "updated_at": "2026-02-01T00:00:00Z",
    }
    events = [
        webhook_event(merchant, "customer.created", customer),
        webhook_event(
            merchant,
            "dispute.created",
            {
                "id": "DWEB",
                "location_id": "L001",
                "created_at": "2026-02-01T00:00:00Z",
                "updated_at": "2026-02-01T00:00:00Z",
            },
        ),
        webhook_event(
            merchant,
            "refund.created",
            {
                "id": "RWEB",
                "location_id": "L001",
                "created_at": "2026-02-01T00:00:00Z",
                "updated_at": "2026-02-01T00:00:00Z",
            },
        ),
        webhook_event(merchant, "catalog.version.updated", {"id": ""}),
    ]
    inventory = webhook_event(merchant, "inventory.count.updated", {})
    inventory["data"]["object"] = {
        "inventory_counts": [
            {
                "catalog_object_id": "VAR-BASIL-100G",
                "location_id": "L002",
                "state": "IN_STOCK",
                "quantity": "7",
                "calculated_at": "2026-02-01T00:00:00Z",
            }
        ]
    }
    events.append(inventory)
    async with aiohttp.ClientSession() as session:
        for event in events:
            assert await send_event(url, NOTIFICATION_URL, KEY, event, session=session) == 200

    async def everything() -> bool:
        found = []
        for path, key, wanted in (
            ("customers", "customers", "CWEB"),
            ("disputes", "disputes", "DWEB"),
            ("refunds", "refunds", "RWEB"),
        ):
            _, page = await owners.call("alice", "GET", f"/api/v1/pos/{path}", limit=500)
            found.append(any(o["id"] == wanted for o in page[key]))
        _, page = await owners.call("alice", "GET", "/api/v1/pos/inventory", location_id="L002")
        found.append(page["total"] == 1)
        _, status = await owners.call("alice", "GET", f"/api/v1/pos/sync/status/{config['id']}")
        found.append(
            any(j["kind"] == "products" and j["trigger"] == "webhook" for j in status["jobs"])
        )
        return all(found)

    await wait_for(everything, "every event applied")
    deleted = webhook_event(merchant, "customer.deleted", customer, deleted=True)
    assert await send_event(url, NOTIFICATION_URL, KEY, deleted) == 200

    async def gone() -> bool:
        _, page = await owners.call("alice", "GET", "/api/v1/pos/customers", limit=500)
        return not any(o["id"] == "CWEB" for o in page["customers"])

    await wait_for(gone, "the deletion applied")


async def test_a_changed_key_or_a_deleted_configuration_holds_at_once(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    # The receiver remembers which configurations an event may belong to for a few seconds:
    # the new key must take over, and the old key and a deleted configuration stop at once.
    config = await connected_config(owners, fake)
    url = str(owners.cloud.client.make_url("/api/v1/pos/webhook"))
    merchant = fake.merchant.merchant_id

    def event() -> dict[str, Any]:
        return webhook_event(merchant, "payment.updated", payment())

    assert await send_event(url, NOTIFICATION_URL, KEY, event()) == 200
    status, _ = await owners.call(
        "alice",
        "PUT",
        f"/api/v1/pos/configs/{config['id']}",
        {"webhook_signature_key": "whsec-rotated"},
    )
    assert status == 200
    assert await send_event(url, NOTIFICATION_URL, KEY, event()) == 403
    assert await send_event(url, NOTIFICATION_URL, "whsec-rotated", event()) == 200

    async def applied() -> bool:
        conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
        try:
            pending: int = await conn.fetchval(
                "SELECT count(*) FROM pos_webhook_events WHERE applied_at IS NULL"
            )
        finally:
            await conn.close(timeout=10)
        return pending == 0

    await wait_for(applied, "the events applied")
    status, _ = await owners.call("alice", "DELETE", f"/api/v1/pos/configs/{config['id']}")
    assert status == 204
    assert await send_event(url, NOTIFICATION_URL, "whsec-rotated", event()) == 403
    assert await stored_events(cloud_db) == 0  # deleted with their configuration
