"""/api/v1/webhooks on the cloud: the same answers as the agent's, access by role and farm under
RLS, the secret sealed at rest and shown once, and SSRF targets refused with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.webhooks import EVENT_KINDS
from tests.cloud.webhooks.conftest import (
    FAST,
    Cloud,
    Conn,
    World,
    add_webhook,
    auth,
)
from tests.support.webhook_receiver import WebhookReceiver


async def test_crud_with_the_secret_shown_once_and_sealed_at_rest(
    make_cloud: Any, world: World, system: Conn, receiver: WebhookReceiver
) -> None:
    cloud: Cloud = await make_cloud(**FAST)
    alice = await cloud.login(World.email("alice"))
    created = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    secret = created["secret"]
    assert secret.startswith("whsec_") and created["farm_id"] == str(world.farm_a.farm_id)
    stored = await system.fetchval("SELECT secret FROM webhooks WHERE id = $1::uuid", created["id"])
    assert secret.encode() not in bytes(stored)

    path = f"/api/v1/webhooks/{created['id']}"
    texts = []
    resp = await cloud.client.get(path, headers=auth(alice))
    assert resp.status == 200
    texts.append(await resp.text())
    resp = await cloud.client.get("/api/v1/webhooks", headers=auth(alice))
    listed = await resp.json()
    assert [w["id"] for w in listed["webhooks"]] == [created["id"]] and listed["total"] == 1
    texts.append(await resp.text())
    body = {"url": receiver.url, "event_types": ["farm.status_changed"], "description": "PLC"}
    resp = await cloud.client.put(path, json=body, headers=auth(alice))
    assert resp.status == 200, await resp.text()
    texts.append(await resp.text())
    replaced = await resp.json()
    assert replaced["event_types"] == ["farm.status_changed"] and replaced["description"] == "PLC"
    for text in texts:
        assert secret not in text and '"secret"' not in text
    resp = await cloud.client.delete(path, headers=auth(alice))
    assert resp.status == 204
    resp = await cloud.client.get(path, headers=auth(alice))
    assert resp.status == 404 and (await resp.json())["error"]["code"] == "RESOURCE_NOT_FOUND"


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("admin", 201),
        ("alice", 201),  # farm manager, creator of farm A
        ("bob", 404),  # farm manager of another farm: farm A is not there for him
        ("will", 403),  # operator with read_write
        ("rita", 403),  # user with read_only
        ("nora", 403),  # analyst, no grant
    ],
)
async def test_admins_and_the_farms_managers_manage_its_webhooks(
    make_cloud: Any, world: World, receiver: WebhookReceiver, name: str, status: int
) -> None:
    cloud: Cloud = await make_cloud(**FAST)
    token = await cloud.login(World.email(name))
    body = {
        "farm_id": str(world.farm_a.farm_id),
        "url": receiver.url,
        "event_types": ["alert.raised"],
    }
    resp = await cloud.client.post("/api/v1/webhooks", json=body, headers=auth(token))
    assert resp.status == status, await resp.text()

    alice = await cloud.login(World.email("alice"))
    alices = await add_webhook(cloud, alice, world.farm_a.farm_id, receiver)
    path = f"/api/v1/webhooks/{alices['id']}"
    for method, suffix, ok in (
        ("GET", "", 200),
        ("GET", "/deliveries", 200),
        ("POST", "/test", 202),
    ):
        resp = await cloud.client.request(method, path + suffix, headers=auth(token))
        assert resp.status == (ok if status == 201 else status), (method, suffix)
    resp = await cloud.client.get("/api/v1/webhooks", headers=auth(token))
    if name in ("will", "rita", "nora"):
        assert resp.status == 403
    else:
        ids = [w["id"] for w in (await resp.json())["webhooks"]]
        assert (alices["id"] in ids) == (status == 201)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.20.30.40/hook",
        "http://192.168.1.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "http://224.0.0.1/hook",
        "https://no-such-host.invalid/hook",
        # IPv6 forms carrying an internal IPv4 address (issue 24): NAT64, 6to4, IPv4-compatible,
        # Teredo.
        "http://[64:ff9b::7f00:1]/",
        "http://[64:ff9b::a9fe:a9fe]/latest",
        "http://[2002:7f00:1::]/",
        "http://[::127.0.0.1]:8080/",
        "http://[2001:0:7f00:1::1]/",
    ],
)
async def test_ssrf_targets_are_refused_with_a_clear_422_and_nothing_changes(
    cloud: Cloud, world: World, system: Conn, url: str
) -> None:
    alice = await cloud.login(World.email("alice"))
    body = {"farm_id": str(world.farm_a.farm_id), "url": url, "event_types": ["alert.raised"]}
    resp = await cloud.client.post("/api/v1/webhooks", json=body, headers=auth(alice))
    answer = await resp.json()
    assert resp.status == 422, answer
    assert answer["error"]["code"] == "VALIDATION_ERROR"
    (issue,) = answer["error"]["details"]["errors"]
    assert issue["field"] == "url" and "public addresses only" in issue["issue"]
    assert await system.fetchval("SELECT count(*) FROM webhooks") == 0


async def test_an_update_to_an_ssrf_target_is_refused_and_the_webhook_kept(
    make_cloud: Any, world: World, system: Conn
) -> None:
    # Created at a public address (not resolved again here), then pointed at the metadata service.
    cloud: Cloud = await make_cloud()
    alice = await cloud.login(World.email("alice"))
    body = {
        "farm_id": str(world.farm_a.farm_id),
        "url": "https://93.184.215.14/hook",
        "event_types": ["alert.raised"],
    }
    resp = await cloud.client.post("/api/v1/webhooks", json=body, headers=auth(alice))
    assert resp.status == 201, await resp.text()
    created = await resp.json()
    change = {"url": "http://169.254.169.254/latest", "event_types": ["alert.cleared"]}
    resp = await cloud.client.put(
        f"/api/v1/webhooks/{created['id']}", json=change, headers=auth(alice)
    )
    assert resp.status == 422
    row = await system.fetchrow("SELECT url, event_types FROM webhooks")
    assert row is not None and row["url"] == body["url"] and row["event_types"] == ["alert.raised"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "gopher://example.com/"}, "url"),
        ({"event_types": ["alert.exploded"]}, "event_types.0"),
        ({"event_types": []}, "event_types"),
        ({"secret": "whsec_short"}, "secret"),
        ({"farm_id": "not-a-uuid"}, "farm_id"),
    ],
)
async def test_bad_input_is_a_422(
    cloud: Cloud, world: World, system: Conn, change: dict[str, Any], field: str
) -> None:
    alice = await cloud.login(World.email("alice"))
    body = {
        "farm_id": str(world.farm_a.farm_id),
        "url": "https://93.184.215.14/hook",
        "event_types": ["alert.raised"],
        **change,
    }
    resp = await cloud.client.post("/api/v1/webhooks", json=body, headers=auth(alice))
    answer = await resp.json()
    assert resp.status == 422, answer
    assert field in {i["field"] for i in answer["error"]["details"]["errors"]}
    assert await system.fetchval("SELECT count(*) FROM webhooks") == 0


async def test_the_event_kinds_table_is_the_catalogue(system: Conn) -> None:
    rows = await system.fetch("SELECT kind, event_type FROM webhook_event_kinds")
    assert {r["kind"]: r["event_type"] for r in rows} == {
        kind: str(event_type) for kind, event_type in EVENT_KINDS.items()
    }
