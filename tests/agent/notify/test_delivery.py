"""Notifications reach a person: an event matching a rule is sent through a real Apprise call
into a local ntfy-compatible receiver, with what, where, value and link; failures are retried
and recorded; repeats go on until someone acknowledges; the mail path uses the configured SMTP
server."""

from __future__ import annotations

from typing import Any

from agent.web.keys import DATABASE
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import (
    FAST,
    add_contact,
    add_rule,
    notifications,
    record_event,
    until,
)
from tests.conftest import AgentFactory
from tests.support.ntfy_receiver import NtfyReceiver
from tests.support.smtp_server import smtp_server


async def test_a_raised_alert_reaches_the_contact_point_with_what_where_value_and_link(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent, "North")
    contact = await add_contact(agent, farm_id, ntfy.url("night"))
    await add_rule(agent, farm_id, [contact["id"]])

    event_id = await record_event(agent, farm_id)

    [message] = await ntfy.wait_for(lambda got: len(got) >= 1)
    assert message.topic == "night"
    assert "North" in message.title and "CRITICAL" in message.title
    assert "temperature 35 above 30" in message.message
    assert "Value: temperature 35" in message.message and "threshold 30" in message.message
    assert "Since: " in message.message
    assert f"http://farm.local:8080/#/alerts?event={event_id}" in message.message
    assert message.headers.get("X-Click") == f"http://farm.local:8080/#/alerts?event={event_id}"
    [sent] = await until(
        lambda: notifications(agent, event_id=event_id), lambda ns: ns and ns[0]["status"] == "sent"
    )
    assert sent["contact_point_id"] == contact["id"] and sent["attempts"] == 1
    assert sent["step"] == "first" and sent["acknowledged_at"] is None
    metrics = await (await agent.client.get("/metrics")).text()
    assert "farm_agent_notifications_sent_total 1.0" in metrics
    assert "farm_agent_notifications_pending 0.0" in metrics


async def test_events_outside_the_rule_are_not_sent(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    other_farm = await create_farm(agent, "South")
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(agent, farm_id, [contact["id"]], severities=["critical"])

    await record_event(agent, farm_id, severity="warning", message="a mere warning")
    await record_event(agent, farm_id, kind="device_fault", message="another kind")
    await record_event(agent, other_farm, message="another farm")
    await record_event(agent, farm_id, message="the one that counts")

    await ntfy.wait_for(lambda got: len(got) >= 1)
    rows = await agent.client.app[DATABASE].fetch_all("SELECT event FROM notifications")
    assert len(list(rows)) == 1
    assert [m.message.splitlines()[0] for m in ntfy.received] == ["the one that counts"]


async def test_a_failing_service_is_retried_and_its_answer_recorded(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(agent, farm_id, [contact["id"]])
    ntfy.failures = [500, 503]

    event_id = await record_event(agent, farm_id)

    await ntfy.wait_for(lambda got: len(got) >= 1)
    [sent] = await until(
        lambda: notifications(agent, event_id=event_id), lambda ns: ns and ns[0]["status"] == "sent"
    )
    assert sent["attempts"] == 3
    assert len(ntfy.received) == 1


async def test_a_mailto_contact_point_uses_the_configured_mail_server(
    make_agent: AgentFactory,
) -> None:
    with smtp_server() as (port, inbox):
        agent = await make_agent(
            **FAST, smtp_host="127.0.0.1", smtp_port=port, smtp_security="none"
        )
        farm_id = await create_farm(agent, "North")
        contact = await add_contact(agent, farm_id, "mailto:grower@farm.test")
        assert contact["service"] == "mailto"
        await add_rule(agent, farm_id, [contact["id"]])

        event_id = await record_event(agent, farm_id)

        await until(
            lambda: notifications(agent, event_id=event_id),
            lambda ns: ns and ns[0]["status"] == "sent",
        )
        [mail] = [m for m in inbox.messages if m["To"] == "grower@farm.test"]
        assert "North" in str(mail["Subject"])
        body: Any = mail.get_body()
        assert "temperature 35 above 30" in body.get_content()


async def test_the_acknowledge_button_of_an_ntfy_message_works_once_without_a_sign_in(
    make_agent: AgentFactory, ntfy: NtfyReceiver
) -> None:
    agent = await make_agent(**FAST)
    farm_id = await create_farm(agent)
    contact = await add_contact(agent, farm_id, ntfy.url())
    await add_rule(agent, farm_id, [contact["id"]])
    event_id = await record_event(agent, farm_id)
    [message] = await ntfy.wait_for(lambda got: len(got) == 1)
    action = message.headers["X-Actions"]
    kind, label, link, method, clear = (part.strip() for part in action.split(","))
    assert (kind, label, method, clear) == ("http", "Acknowledge", "method=POST", "clear=true")
    assert link.startswith("http://farm.local:8080/api/v1/notifications/acknowledge?token=")
    path = link.removeprefix("http://farm.local:8080")

    forged = path[:-4] + ("AAAA" if not path.endswith("AAAA") else "BBBB")
    resp = await agent.client.post(forged)
    assert resp.status == 403 and (await resp.json())["error"]["code"] == "FORBIDDEN"
    resp = await agent.client.post(path)  # no Authorization: the link is the credential
    assert resp.status == 200, await resp.text()
    acknowledged = await resp.json()
    assert acknowledged["event_id"] == event_id
    assert acknowledged["acknowledged_by_email"] == "admin@farm.test"  # the contact's owner
    resp = await agent.client.post(path)
    assert resp.status == 409 and (await resp.json())["error"]["code"] == "RESOURCE_EXISTS"
    events = await agent.client.get(
        "/api/v1/events", params={"acknowledged": "true"}, headers=agent.auth()
    )
    assert [e["id"] for e in (await events.json())["events"]] == [event_id]


async def test_an_apprise_mail_url_sends_through_its_own_mail_server(
    make_agent: AgentFactory,
) -> None:
    with smtp_server() as (port, inbox):
        agent = await make_agent(**FAST)  # no FARM_SMTP_*: the URL names its server
        farm_id = await create_farm(agent, "North")
        url = f"mailto://127.0.0.1:{port}?from=farm@farm.test&to=night@farm.test&mode=insecure"
        contact = await add_contact(agent, farm_id, url)
        assert contact["service"] == "mailto"
        await add_rule(agent, farm_id, [contact["id"]])

        event_id = await record_event(agent, farm_id)

        [sent] = await until(
            lambda: notifications(agent, event_id=event_id),
            lambda ns: ns and ns[0]["status"] == "sent",
        )
        assert "Sent Email to night@farm.test" in sent["answer"]
        [mail] = [m for m in inbox.messages if m["To"] == "night@farm.test"]
        assert "North" in str(mail["Subject"])
