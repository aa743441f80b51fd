"""/api/v1/contact-points, /notification-rules and /notifications on the agent: a contact
point's URL is stored sealed and never shown back, the test button answers what the service
said, access follows role and farm grant, and bad input is answered with the envelope while
nothing changes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent.sync.link import CloudLink
from agent.web.keys import DATABASE
from farmkit.sealing import open_sealed, public_key_text
from protocol.jwk import public_jwk
from tests.agent.devices_api.conftest import create_farm, error_of, login_as
from tests.agent.hierarchy_helpers import table_counts
from tests.agent.notify.conftest import FAST, add_contact, add_rule, notifications
from tests.conftest import Agent, AgentFactory
from tests.support.mosquitto import free_port
from tests.support.ntfy_receiver import NtfyReceiver

TOKEN_URL = "ntfy://bearer-tk_s3cr3t0123456789@127.0.0.1:{port}/night?auth=token"


async def test_a_contact_points_url_is_never_shown_back_nor_stored_in_clear(
    agent: Agent, ntfy: NtfyReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="aiosqlite")
    farm_id = await create_farm(agent)
    url = f"ntfy://user:pa55w0rd-secret@127.0.0.1:{ntfy.port}/night"
    created = await add_contact(agent, farm_id, url, name="Ana's phone")
    assert created["service"] == "ntfy" and created["name"] == "Ana's phone"
    answers = [str(created)]
    for path in (f"/api/v1/contact-points/{created['id']}", "/api/v1/contact-points"):
        resp = await agent.client.get(path, headers=agent.auth())
        assert resp.status == 200
        answers.append(await resp.text())
    resp = await agent.client.put(
        f"/api/v1/contact-points/{created['id']}",
        json={"name": "Ana", "quiet_start": "22:00", "quiet_end": "06:00"},
        headers=agent.auth(),
    )
    assert resp.status == 200, await resp.text()
    replaced = await resp.json()
    assert replaced["quiet_start"] == "22:00" and replaced["service"] == "ntfy"
    answers.append(await resp.text())
    for text in answers:
        assert "pa55w0rd-secret" not in text and '"url"' not in text
    assert "pa55w0rd-secret" not in caplog.text

    await agent.client.app[DATABASE].checkpoint()
    state = agent.client.app[DATABASE]
    row = await state.fetch_one("SELECT url_sealed FROM contact_points")
    assert row is not None and b"pa55w0rd-secret" not in bytes(row["url_sealed"])
    # The URL kept (the PUT gave none) still reaches the receiver.
    resp = await agent.client.post(
        f"/api/v1/contact-points/{created['id']}/test", headers=agent.auth()
    )
    assert resp.status == 200 and (await resp.json())["ok"] is True
    assert [m.topic for m in ntfy.received] == ["night"]


async def test_the_test_button_answers_what_the_service_said(
    agent: Agent, ntfy: NtfyReceiver
) -> None:
    farm_id = await create_farm(agent, "North")
    contact = await add_contact(agent, farm_id, ntfy.url("phone"))

    resp = await agent.client.post(
        f"/api/v1/contact-points/{contact['id']}/test", headers=agent.auth()
    )
    assert resp.status == 200
    good = await resp.json()
    assert good["ok"] is True and "Sent ntfy notification" in good["answer"]
    assert ntfy.received[0].title == "[TEST] North: test message"

    ntfy.failures = [403]
    resp = await agent.client.post(
        f"/api/v1/contact-points/{contact['id']}/test", headers=agent.auth()
    )
    bad = await resp.json()
    assert bad["ok"] is False and "403" in bad["answer"]
    history = {n["id"]: n for n in await notifications(agent, farm_id=farm_id)}
    assert history[good["notification_id"]]["status"] == "sent"
    assert history[bad["notification_id"]]["status"] == "failed"
    assert history[bad["notification_id"]]["step"] == "test"


async def test_a_mailto_without_a_mail_server_says_so_on_test(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, "mailto:grower@farm.test")
    resp = await agent.client.post(
        f"/api/v1/contact-points/{contact['id']}/test", headers=agent.auth()
    )
    answer = await resp.json()
    assert answer["ok"] is False and "FARM_SMTP_HOST" in answer["answer"]


@pytest.mark.parametrize(
    ("role", "permission", "status"),
    [
        ("farm_manager", "read_write", 201),
        ("farm_manager", "read_only", 403),
        ("farm_manager", None, 404),
        ("operator", "read_write", 403),
        ("user", "read_write", 403),
    ],
)
async def test_admins_and_farm_managers_who_may_write_the_farm_manage_contact_points(
    agent: Agent, ntfy: NtfyReceiver, role: str, permission: str | None, status: int
) -> None:
    farm_id = await create_farm(agent)
    token = await login_as(agent, role, farm_id if permission else None, permission or "")
    body = {"farm_id": farm_id, "name": "x", "url": ntfy.url()}
    resp = await agent.client.post("/api/v1/contact-points", json=body, headers=agent.auth(token))
    assert resp.status == status, await resp.text()
    admins = await add_contact(agent, farm_id, ntfy.url())
    rule = {
        "farm_id": farm_id,
        "event_kinds": ["alert_raised"],
        "contact_point_ids": [admins["id"]],
    }
    resp = await agent.client.post(
        "/api/v1/notification-rules", json=rule, headers=agent.auth(token)
    )
    assert resp.status == status, await resp.text()
    resp = await agent.client.get(
        f"/api/v1/contact-points/{admins['id']}", headers=agent.auth(token)
    )
    assert resp.status == (200 if status == 201 else status)


async def test_operators_see_the_history_and_acknowledge_but_strangers_do_not(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    from tests.agent.notify.conftest import record_event, until

    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(agent, farm_id, [contact["id"]])
    event_id = await record_event(agent, farm_id)
    [sent] = await until(
        lambda: notifications(agent, event_id=event_id),
        lambda ns: ns and ns[0]["status"] == "sent",
    )
    stranger = await login_as(agent, "operator")
    resp = await agent.client.get("/api/v1/notifications", headers=agent.auth(stranger))
    assert (await resp.json())["notifications"] == []
    resp = await agent.client.post(
        f"/api/v1/notifications/{sent['id']}/acknowledge", headers=agent.auth(stranger)
    )
    assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"
    reader = await login_as(agent, "user", farm_id, "read_only")
    resp = await agent.client.post(
        f"/api/v1/notifications/{sent['id']}/acknowledge", headers=agent.auth(reader)
    )
    assert resp.status == 403
    operator = await login_as(agent, "operator", farm_id)
    resp = await agent.client.get("/api/v1/notifications", headers=agent.auth(operator))
    assert [n["id"] for n in (await resp.json())["notifications"]] == [sent["id"]]
    resp = await agent.client.post(
        f"/api/v1/notifications/{sent['id']}/acknowledge", headers=agent.auth(operator)
    )
    assert resp.status == 200
    assert (await resp.json())["acknowledged_by_email"].startswith("operator-")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "nosuchservice://somewhere/x"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": "mailto:not-an-address"}, "url"),
        ({"name": ""}, "name"),
        ({"quiet_start": "25:00", "quiet_end": "06:00"}, "quiet_start"),
        ({"quiet_start": "22:00"}, "body"),
        ({"colour": "red"}, "colour"),
    ],
)
async def test_a_bad_contact_point_is_a_422_and_changes_nothing(
    agent: Agent, ntfy: NtfyReceiver, change: dict[str, Any], field: str
) -> None:
    farm_id = await create_farm(agent)
    existing = await add_contact(agent, farm_id, ntfy.url())
    before = await table_counts(agent)
    body = {"farm_id": farm_id, "name": "x", "url": ntfy.url(), **change}
    resp = await agent.client.post("/api/v1/contact-points", json=body, headers=agent.auth())
    error = await error_of(resp, 422)
    assert error["code"] == "VALIDATION_ERROR"
    assert field in {issue["field"] for issue in error["details"]["errors"]}, error
    body.pop("farm_id")
    resp = await agent.client.put(
        f"/api/v1/contact-points/{existing['id']}", json=body, headers=agent.auth()
    )
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"
    assert await table_counts(agent) == before


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"event_kinds": ["pump_exploded"]}, "event_kinds.0"),
        ({"event_kinds": []}, "event_kinds"),
        ({"severities": ["loud"]}, "severities.0"),
        ({"contact_point_ids": []}, "contact_point_ids"),
        ({"contact_point_ids": ["7c1b7f0e-93c5-4f43-9a51-7f2d1f0e3b11"]}, "contact_point_ids"),
        ({"repeat_every_min": 0}, "repeat_every_min"),
        ({"escalate_after_min": 10}, "body"),
    ],
)
async def test_a_bad_rule_is_a_422_and_changes_nothing(
    agent: Agent, ntfy: NtfyReceiver, change: dict[str, Any], field: str
) -> None:
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url())
    existing = await add_rule(agent, farm_id, [contact["id"]])
    before = await table_counts(agent)
    body = {
        "farm_id": farm_id,
        "event_kinds": ["alert_raised"],
        "contact_point_ids": [contact["id"]],
        **change,
    }
    resp = await agent.client.post("/api/v1/notification-rules", json=body, headers=agent.auth())
    error = await error_of(resp, 422)
    assert field in {issue["field"] for issue in error["details"]["errors"]}, error
    body.pop("farm_id")
    resp = await agent.client.put(
        f"/api/v1/notification-rules/{existing['id']}", json=body, headers=agent.auth()
    )
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"
    assert await table_counts(agent) == before


async def test_a_rule_may_not_name_another_farms_contact_point(
    agent: Agent, ntfy: NtfyReceiver
) -> None:
    farm_id = await create_farm(agent)
    other = await create_farm(agent, "South")
    theirs = await add_contact(agent, other, ntfy.url())
    body = {
        "farm_id": farm_id,
        "event_kinds": ["alert_raised"],
        "contact_point_ids": [theirs["id"]],
    }
    resp = await agent.client.post("/api/v1/notification-rules", json=body, headers=agent.auth())
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"


async def test_deleting_a_contact_point_takes_it_out_of_its_rules(
    agent: Agent, ntfy: NtfyReceiver
) -> None:
    farm_id = await create_farm(agent)
    one = await add_contact(agent, farm_id, ntfy.url("one"))
    two = await add_contact(agent, farm_id, ntfy.url("two"))
    rule = await add_rule(agent, farm_id, [one["id"], two["id"]])
    resp = await agent.client.delete(f"/api/v1/contact-points/{one['id']}", headers=agent.auth())
    assert resp.status == 204
    resp = await agent.client.get(f"/api/v1/notification-rules/{rule['id']}", headers=agent.auth())
    assert (await resp.json())["contact_point_ids"] == [two["id"]]
    resp = await agent.client.delete(
        f"/api/v1/notification-rules/{rule['id']}", headers=agent.auth()
    )
    assert resp.status == 204
    resp = await agent.client.get(f"/api/v1/notification-rules/{rule['id']}", headers=agent.auth())
    assert resp.status == 404


async def test_contact_points_go_to_the_cloud_in_the_sync_outbox_sealed_to_it(
    make_agent: AgentFactory, ntfy: NtfyReceiver, tmp_path: Path
) -> None:
    # Paired with a cloud (that is not there) whose sealing key the agent holds.
    sealing = X25519PrivateKey.generate()
    token_key = Ed25519PrivateKey.generate().public_key()
    CloudLink(
        cloud_url=f"http://127.0.0.1:{free_port()}",
        agent_id="8d3e1d2c-5b7a-4f0e-9a43-1f6c2b9d0e11",
        cloud_issuer="farm-cloud",
        cloud_public_key=public_jwk(token_key)["x"],
        cloud_sealing_key=public_key_text(sealing.public_key()),
    ).save(tmp_path / "state")
    agent = await make_agent()
    farm_id = await create_farm(agent)
    created = await add_contact(agent, farm_id, ntfy.url("topic-5e2b"))
    resp = await agent.client.put(
        f"/api/v1/contact-points/{created['id']}",
        json={"name": "renamed", "enabled": False},
        headers=agent.auth(),
    )
    assert resp.status == 200
    resp = await agent.client.delete(
        f"/api/v1/contact-points/{created['id']}", headers=agent.auth()
    )
    assert resp.status == 204
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT op, payload FROM outbox WHERE entity = 'contact_points' ORDER BY seq"
    )
    sent = [(row["op"], json.loads(row["payload"])) for row in rows]
    assert [op for op, _ in sent] == ["upsert", "upsert", "delete"]
    assert all(
        "url" not in data and "topic-5e2b" not in row["payload"]
        for (_, data), row in zip(sent, rows, strict=True)
    )
    opened = [open_sealed(sealing, data["url_sealed"], created["id"]) for _, data in sent[:2]]
    assert opened == [ntfy.url("topic-5e2b")] * 2  # kept when the change named none
    assert sent[0][1]["farm_id"] == farm_id
    assert sent[1][1]["name"] == "renamed" and sent[1][1]["enabled"] is False
    assert sent[2][1] == {"id": created["id"]}


async def test_an_unpaired_agent_queues_no_contact_point_for_the_cloud(
    agent: Agent, ntfy: NtfyReceiver
) -> None:
    farm_id = await create_farm(agent)
    await add_contact(agent, farm_id, ntfy.url("night"))
    rows = await agent.client.app[DATABASE].fetch_all(
        "SELECT 1 FROM outbox WHERE entity = 'contact_points'"
    )
    assert list(rows) == []  # they go, sealed, once the agent knows the cloud's key


async def test_a_contact_point_reaches_a_user_of_its_farm_and_no_one_else(
    agent: Agent, ntfy: NtfyReceiver
) -> None:
    farm_id, other_farm = await create_farm(agent), await create_farm(agent, "South")
    db = agent.client.app[DATABASE]

    async def user_of(farm: str | None, role: str = "operator") -> str:
        token = await login_as(agent, role, farm)
        resp = await agent.client.get("/api/v1/users/profile", headers=agent.auth(token))
        return str((await resp.json())["id"])

    grower, stranger = await user_of(farm_id), await user_of(other_farm)
    admin = await user_of(None, "admin")
    created = await add_contact(agent, farm_id, ntfy.url(), owner_id=grower)
    assert created["owner_id"] == grower
    body = {"name": "night shift", "owner_id": admin}
    resp = await agent.client.put(
        f"/api/v1/contact-points/{created['id']}", json=body, headers=agent.auth()
    )
    assert resp.status == 200 and (await resp.json())["owner_id"] == admin

    before = await table_counts(agent)
    for owner in (stranger, "5f0c6f5e-8a47-4c8e-9d3b-2b1f0a9e7c11"):
        resp = await agent.client.post(
            "/api/v1/contact-points",
            json={"farm_id": farm_id, "name": "x", "url": ntfy.url(), "owner_id": owner},
            headers=agent.auth(),
        )
        error = await error_of(resp, 422)
        assert error["details"]["errors"] == [
            {"field": "owner_id", "issue": "not an active user who may see this farm"}
        ], error
        resp = await agent.client.put(
            f"/api/v1/contact-points/{created['id']}",
            json={"name": "x", "owner_id": owner},
            headers=agent.auth(),
        )
        assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"
    assert await table_counts(agent) == before
    row = await db.fetch_one("SELECT owner_id, name FROM contact_points")
    assert row is not None and (row["owner_id"], row["name"]) == (admin, "night shift")
