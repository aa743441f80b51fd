"""/api/v1/webhooks on the agent: create (secret shown once), read, replace, delete, access by
role and farm grant, and bad input answered with the envelope while nothing changes."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent.web.keys import DATABASE
from integrations.webhooks import EVENT_KINDS
from tests.agent.devices_api.conftest import create_farm, error_of, login_as
from tests.agent.hierarchy_helpers import table_counts
from tests.agent.webhooks.conftest import add_webhook
from tests.conftest import Agent
from tests.support.webhook_receiver import WebhookReceiver

GIVEN_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def test_a_webhook_is_created_with_a_generated_secret_shown_once(
    agent: Agent, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # As configure_logging sets it: aiosqlite's DEBUG lines carry every statement's parameters.
    caplog.set_level(logging.INFO, logger="aiosqlite")
    farm_id = await create_farm(agent)
    created = await add_webhook(agent, farm_id, receiver, description="greenhouse PLC")
    secret = created["secret"]
    assert secret.startswith("whsec_") and len(secret) > 40
    assert created["enabled"] is True
    assert created["event_types"] == ["alert.raised", "alert.cleared"]

    answers: list[Any] = []
    for path in (f"/api/v1/webhooks/{created['id']}", "/api/v1/webhooks"):
        resp = await agent.client.get(path, headers=agent.auth())
        assert resp.status == 200
        answers.append(await resp.text())
    resp = await agent.client.put(
        f"/api/v1/webhooks/{created['id']}",
        json={"url": receiver.url, "event_types": ["device.offline"], "enabled": False},
        headers=agent.auth(),
    )
    assert resp.status == 200
    answers.append(await resp.text())
    replaced = await resp.json()
    assert replaced["event_types"] == ["device.offline"] and replaced["enabled"] is False
    assert replaced["description"] == ""
    for text in answers:
        assert secret not in text and '"secret"' not in text
    assert secret not in caplog.text


async def test_a_given_secret_is_kept_and_a_webhook_can_be_deleted(
    agent: Agent, receiver: WebhookReceiver
) -> None:
    farm_id = await create_farm(agent)
    created = await add_webhook(agent, farm_id, receiver, secret=GIVEN_SECRET)
    assert created["secret"] == GIVEN_SECRET
    resp = await agent.client.delete(f"/api/v1/webhooks/{created['id']}", headers=agent.auth())
    assert resp.status == 204
    resp = await agent.client.get(f"/api/v1/webhooks/{created['id']}", headers=agent.auth())
    assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"


@pytest.mark.parametrize(
    ("role", "permission", "status"),
    [
        ("farm_manager", "read_write", 201),
        ("farm_manager", "read_only", 403),
        ("farm_manager", None, 404),
        ("operator", "read_write", 403),
        ("analyst", "read_write", 403),
        ("user", "read_write", 403),
    ],
)
async def test_admins_and_farm_managers_who_may_write_the_farm_manage_webhooks(
    agent: Agent, receiver: WebhookReceiver, role: str, permission: str | None, status: int
) -> None:
    farm_id = await create_farm(agent)
    token = await login_as(agent, role, farm_id if permission else None, permission or "")
    body = {"farm_id": farm_id, "url": receiver.url, "event_types": ["alert.raised"]}
    resp = await agent.client.post("/api/v1/webhooks", json=body, headers=agent.auth(token))
    assert resp.status == status, await resp.text()

    admins = await add_webhook(agent, farm_id, receiver)
    for method, path in (
        ("GET", f"/api/v1/webhooks/{admins['id']}"),
        ("GET", f"/api/v1/webhooks/{admins['id']}/deliveries"),
        ("POST", f"/api/v1/webhooks/{admins['id']}/test"),
        ("DELETE", f"/api/v1/webhooks/{admins['id']}"),
    ):
        resp = await agent.client.request(method, path, headers=agent.auth(token))
        expected = {201: {"GET": 200, "POST": 202, "DELETE": 204}[method]}.get(status, status)
        assert resp.status == expected, (method, path, await resp.text())
        if expected == 204:
            break
    resp = await agent.client.get("/api/v1/webhooks", headers=agent.auth(token))
    if status == 201:
        assert resp.status == 200
    elif role == "farm_manager":
        assert resp.status == 200 and (await resp.json())["webhooks"] == []
    else:
        assert resp.status == 403


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "ftp://10.0.0.5/hook"}, "url"),
        ({"url": "http:///no-host"}, "url"),
        ({"url": "http://user:pass@10.0.0.5/hook"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"event_types": ["alert.exploded"]}, "event_types.0"),
        ({"event_types": []}, "event_types"),
        ({"event_types": ["alert.raised", "alert.raised"]}, "event_types"),
        ({"secret": "whsec_short"}, "secret"),
        ({"secret": "plain-text-secret-that-is-long-enough"}, "secret"),
        ({"colour": "red"}, "colour"),
    ],
)
async def test_bad_input_is_a_422_and_changes_nothing(
    agent: Agent, receiver: WebhookReceiver, change: dict[str, Any], field: str
) -> None:
    farm_id = await create_farm(agent)
    existing = await add_webhook(agent, farm_id, receiver)
    before = await table_counts(agent)
    body = {"farm_id": farm_id, "url": receiver.url, "event_types": ["alert.raised"], **change}
    resp = await agent.client.post("/api/v1/webhooks", json=body, headers=agent.auth())
    error = await error_of(resp, 422)
    assert error["code"] == "VALIDATION_ERROR"
    assert field in {issue["field"] for issue in error["details"]["errors"]}, error
    body.pop("farm_id")
    resp = await agent.client.put(
        f"/api/v1/webhooks/{existing['id']}", json=body, headers=agent.auth()
    )
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"
    assert await table_counts(agent) == before
    resp = await agent.client.get(f"/api/v1/webhooks/{existing['id']}", headers=agent.auth())
    assert (await resp.json())["url"] == receiver.url


async def test_a_webhook_on_a_farm_that_does_not_exist_is_a_404(
    agent: Agent, receiver: WebhookReceiver
) -> None:
    body = {
        "farm_id": "00000000-0000-4000-8000-000000000000",
        "url": receiver.url,
        "event_types": ["alert.raised"],
    }
    resp = await agent.client.post("/api/v1/webhooks", json=body, headers=agent.auth())
    assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"


async def test_the_event_kinds_table_is_the_catalogue(agent: Agent) -> None:
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT kind, event_type FROM webhook_event_kinds"
    )
    assert {row["kind"]: row["event_type"] for row in rows} == {
        kind: str(event_type) for kind, event_type in EVENT_KINDS.items()
    }
