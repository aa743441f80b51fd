"""The logs of a full run: one JSON object a line, request ids on a request's lines, and none
of the secrets the run used."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from farmkit.logs import mask_secrets
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.support.mosquitto import free_port
from tests.support.smtp_server import smtp_server

ROOT = Path(__file__).resolve().parents[3]
METRICS_TOKEN = "metrics-scrape-secret-7f3a"
SMTP_PASSWORD = "smtp-password-9c1e"
NEW_PASSWORD = "the new password after reset 51"
WRONG_PASSWORD = "a wrong guess of a password 77"


def call(
    base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """One HTTP request; (status, decoded JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode()


def wait_for_health(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60  # a hung start fails rather than stalls the suite
    while time.monotonic() < deadline:
        assert process.poll() is None, "the agent exited at start-up"
        try:
            if call(base, "GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the agent did not answer /health")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """Run the agent with JSON logs at DEBUG and use every kind of secret once."""
    tmp_path = tmp_path_factory.mktemp("full-run")
    log_path, out_path = tmp_path / "agent.log", tmp_path / "agent.out"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    used: dict[str, str] = {"admin password": ADMIN_PASSWORD, "metrics token": METRICS_TOKEN}
    with (
        smtp_server() as (smtp_port, inbox),
        log_path.open("wb") as log,
        out_path.open("wb") as out,
    ):
        env = {
            **os.environ,
            "FARM_STATE_DIR": str(tmp_path / "state"),
            "FARM_HOST": "127.0.0.1",
            "FARM_PORT": str(port),
            "FARM_MQTT_ENABLED": "false",
            "FARM_SERIAL_ENABLED": "false",
            "FARM_ADMIN_EMAIL": ADMIN_EMAIL,
            "FARM_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "FARM_LOG_FORMAT": "json",
            "FARM_LOG_LEVEL": "DEBUG",
            "FARM_METRICS_TOKEN": METRICS_TOKEN,
            "FARM_SMTP_HOST": "127.0.0.1",
            "FARM_SMTP_PORT": str(smtp_port),
            "FARM_SMTP_SECURITY": "none",
            "FARM_SMTP_PASSWORD": SMTP_PASSWORD,
        }
        agent = subprocess.Popen(
            [sys.executable, "-m", "agent", "run"], env=env, cwd=ROOT, stdout=out, stderr=log
        )
        try:
            wait_for_health(base, agent)
            status, body = call(
                base, "POST", "/api/v1/login", {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
            )
            assert status == 200, body
            used["access token"] = body["access_token"]
            used["refresh token"] = body["refresh_token"]
            auth = {"Authorization": f"Bearer {body['access_token']}"}
            status, me = call(base, "GET", "/api/v1/users/profile", headers=auth)
            assert status == 200, me
            status, key = call(
                base, "POST", "/api/v1/api-keys", {"user_id": me["id"], "name": "k"}, auth
            )
            assert status == 201, key
            used["api key"] = key["key"]
            assert call(base, "GET", "/api/v1/farms", headers={"X-API-Key": key["key"]})[0] == 200
            status, body = call(
                base, "POST", "/auth/refresh", {"refresh_token": used["refresh token"]}
            )
            assert status == 200, body
            used["rotated refresh token"] = body["refresh_token"]
            bad = {"email": ADMIN_EMAIL, "password": WRONG_PASSWORD}
            assert call(base, "POST", "/api/v1/login", bad)[0] == 400
            used["wrong password"] = WRONG_PASSWORD
            status, _ = call(
                base,
                "POST",
                "/auth/reset-password",
                {"email": ADMIN_EMAIL},
                {"X-Request-ID": "reset-request-1"},
            )
            assert status == 202
            used["reset token"] = inbox.token_to(ADMIN_EMAIL)
            confirm = {"token": used["reset token"], "new_password": NEW_PASSWORD}
            assert call(base, "POST", "/auth/reset-password/confirm", confirm)[0] in (200, 204)
            used["new password"] = NEW_PASSWORD
            metrics = {"Authorization": f"Bearer {METRICS_TOKEN}"}
            assert call(base, "GET", "/metrics", headers=metrics)[0] == 200
            assert call(base, "GET", "/api/v1/farms", headers={"Authorization": "Bearer x.y.z"})
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(30)
    return log_path.read_text(), out_path.read_text(), used


def test_a_full_run_logs_no_secret_it_used(full_run):
    log, out, used = full_run
    assert len(used) == 9
    leaked = [name for name, secret in used.items() if secret in log + out]
    assert leaked == []


def test_every_line_is_one_json_object_and_a_request_s_lines_carry_its_id(full_run):
    log, _, _ = full_run
    # The log (stderr) is all JSON; stdout carries the start-up lines for a person.
    lines = [json.loads(line) for line in log.splitlines()]
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    mailed = [line for line in lines if "handed over" in line["message"]]
    assert [line.get("request_id") for line in mailed] == ["reset-request-1"]


def test_the_mask_catches_credentials_in_free_text():
    text = (
        "Authorization: Bearer abc.def.ghi and key fk_ABCDEFGHIJKLMNOP and"
        " password=hunter22 token: 'xyz123' eyJhbGciOi.eyJzdWIiOi.sig"
    )
    masked = mask_secrets(text)
    for secret in ("abc.def.ghi", "fk_ABCDEFGHIJKLMNOP", "hunter22", "xyz123", "eyJhbGciOi"):
        assert secret not in masked
