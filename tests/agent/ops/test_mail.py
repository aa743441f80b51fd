"""Password reset mail goes out over SMTP; without SMTP settings the agent says so."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import ADMIN_EMAIL
from tests.support.smtp_server import Inbox, smtp_server

NEW_PASSWORD = "a brand new password 42"


@pytest.fixture
def smtp():
    with smtp_server() as server:
        yield server


async def test_reset_mail_is_delivered_over_smtp_and_its_token_works(make_agent, smtp, caplog):
    port, inbox = smtp
    caplog.set_level(logging.INFO)
    agent = await make_agent(
        smtp_host="127.0.0.1", smtp_port=port, smtp_security="none", smtp_sender="farm@farm.test"
    )
    resp = await agent.client.post("/auth/reset-password", json={"email": ADMIN_EMAIL})
    assert resp.status == 202
    token = inbox.token_to(ADMIN_EMAIL)
    assert inbox.messages[-1]["From"] == "farm@farm.test"
    body = {"token": token, "new_password": NEW_PASSWORD}
    confirmed = await agent.client.post("/auth/reset-password/confirm", json=body)
    assert confirmed.status in (200, 204), await confirmed.text()
    login = {"email": ADMIN_EMAIL, "password": NEW_PASSWORD}
    assert (await agent.client.post("/api/v1/login", json=login)).status == 200
    assert token not in caplog.text
    health = await (await agent.client.get("/healthz")).json()
    assert health["checks"]["mail"] == f"smtp 127.0.0.1:{port} (none)"


async def test_without_smtp_the_agent_says_so_and_logs_no_token(make_agent, caplog):
    caplog.set_level(logging.INFO)
    agent = await make_agent()
    assert "mail is not configured" in caplog.text
    health = await (await agent.client.get("/healthz")).json()
    assert health["checks"]["mail"] == "not_configured"
    await agent.client.post("/auth/reset-password", json={"email": ADMIN_EMAIL})
    assert "not sent (no SMTP server configured)" in caplog.text
    assert "reset-password/confirm" not in caplog.text  # the body, with its token, stays out


async def test_a_mail_server_that_is_down_fails_no_request(make_agent):
    from tests.support.mosquitto import free_port

    agent = await make_agent(smtp_host="127.0.0.1", smtp_port=free_port(), smtp_security="none")
    resp = await agent.client.post("/auth/reset-password", json={"email": ADMIN_EMAIL})
    assert resp.status == 202


def test_inbox_helper_reads_the_last_line():
    assert Inbox().messages == []
