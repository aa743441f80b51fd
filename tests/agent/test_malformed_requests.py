"""Requests an attacker or a broken client sends: every answer is in the error envelope, a 4xx,
and never a 500, on every route, before or after authentication."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from agent.app import api_of_agent
from protocol.timefmt import iso, parse_iso
from tests.conftest import Agent
from tests.support.live_agent import LiveAgent, live_agent

ANY_ID = "00000000-0000-4000-8000-000000000000"
ROUTES = sorted(
    {
        (endpoint.method, re.sub(r"{\w+}", ANY_ID, endpoint.path))
        for endpoint in api_of_agent().endpoints
    }
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveAgent]:
    with live_agent(tmp_path_factory.mktemp("malformed")) as agent:
        yield agent


@pytest.fixture(scope="module")
def token(served: LiveAgent) -> str:
    return served.login()


def _exchange(agent: LiveAgent, head: str, body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    """Send one raw HTTP/1.1 request; return status, headers and the JSON body."""
    port = int(agent.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    header_block, _, payload = received.partition(b"\r\n\r\n")
    status_line, *lines = header_block.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, json.loads(payload)


def _request(method: str, path: str, headers: dict[str, str], body: bytes) -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: farm", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join(lines) + "\r\n"


def _assert_envelope(status: int, body: Any, expected: int, code: str) -> None:
    assert status == expected, body
    assert body["success"] is False and body["error"]["code"] == code, body
    assert body["request_id"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_a_body_its_encoding_cannot_decode_is_a_400_on_every_route(
    served: LiveAgent, token: str, encoding: str
) -> None:
    assert len(ROUTES) > 50
    wrong = []
    for method, path in ROUTES:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Content-Encoding": encoding,
        }
        status, _, body = _exchange(served, _request(method, path, headers, b"garbage"), b"garbage")
        if status != 400 or body.get("error", {}).get("code") != "BAD_REQUEST":
            wrong.append(f"{method} {path}: {status} {body}")
    assert not wrong, "\n".join(wrong)


def test_gzip_garbage_to_the_login_is_a_400_before_authentication(served: LiveAgent) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    status, _, body = _exchange(
        served, _request("POST", "/api/v1/login", headers, b"garbage"), b"garbage"
    )
    _assert_envelope(status, body, 400, "BAD_REQUEST")
    assert "Brotli" not in body["error"]["message"]


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(
            f"GET /api/v1/farms/?q={'a' * 9000} HTTP/1.1\r\nHost: farm\r\n", id="long URL"
        ),
        pytest.param(
            f"GET /health HTTP/1.1\r\nHost: farm\r\nX-Long: {'a' * 9000}\r\n", id="header"
        ),
        pytest.param(
            "GET /health HTTP/1.1\r\nHost: farm\r\n"
            + "".join(f"X-Header-{i}: 1\r\n" for i in range(150)),
            id="150 headers",
        ),
    ],
)
def test_requests_the_http_parser_refuses_are_answered_in_the_envelope(
    served: LiveAgent, head: str
) -> None:
    status, headers, body = _exchange(served, head)
    _assert_envelope(status, body, 400, "BAD_REQUEST")
    assert headers["Content-Type"].startswith("application/json")
    assert "aaaa" not in body["error"]["message"]  # the request's bytes are not echoed


async def test_deeply_nested_json_is_a_400_not_a_crash(agent: Agent) -> None:
    for path in ("/api/v1/login", "/api/v1/farms/"):
        resp = await agent.client.post(
            path,
            data=b"[" * 1000,
            headers={**agent.auth(), "Content-Type": "application/json"},
        )
        _assert_envelope(resp.status, await resp.json(), 400, "BAD_REQUEST")


@pytest.mark.parametrize(
    "credentials",
    [{"X-API-Key": "fk_guessed"}, {"Authorization": "Bearer not-a-token"}],
    ids=["wrong API key", "garbage bearer token"],
)
async def test_refused_credentials_are_counted_per_address(
    make_agent: Any, credentials: dict[str, str]
) -> None:
    agent: Agent = await make_agent(rate_limit_per_address=5)  # its login spent one
    remaining = []
    while True:
        resp = await agent.client.get("/api/v1/farms/", headers=credentials)
        if resp.status == 429:
            break
        assert resp.status == 401 and len(remaining) < 5
        assert resp.headers["X-RateLimit-Limit"] == "5"
        remaining.append(int(resp.headers["X-RateLimit-Remaining"]))
    assert remaining == list(range(remaining[0], -1, -1)) and remaining[0] <= 3
    _assert_envelope(resp.status, await resp.json(), 429, "RATE_LIMITED")
    assert "Retry-After" in resp.headers


async def test_a_signed_token_whose_expiry_is_not_a_number_is_a_401(
    agent: Agent, tmp_path: Path
) -> None:
    key = load_pem_private_key((tmp_path / "state" / "signing_key.pem").read_bytes(), None)
    me = await (await agent.client.get("/api/v1/users/profile", headers=agent.auth())).json()
    now = int(time.time())
    for exp in ("tomorrow", None, [now + 60], True):
        forged = jwt.encode(
            {
                "iss": "farm-agent",
                "sub": me["id"],
                "role": "admin",
                "sid": "s",
                "jti": "j",
                "iat": now,
                "exp": exp,
            },
            key,  # type: ignore[arg-type]
            algorithm="EdDSA",
        )
        resp = await agent.client.get("/api/v1/farms/", headers=agent.auth(forged))
        assert resp.status == 401, (exp, await resp.text())
        assert (await resp.json())["success"] is False


def test_timestamps_before_the_year_1000_keep_four_digits() -> None:
    early = parse_iso("0001-01-01T00:00:00Z")
    assert iso(early) == "0001-01-01T00:00:00.000Z"
    assert iso(parse_iso("0999-12-31T23:59:59.5Z")) == "0999-12-31T23:59:59.500Z"


def test_a_client_gone_mid_body_is_one_quiet_log_line(
    served: LiveAgent, caplog: pytest.LogCaptureFixture
) -> None:
    """Half a body then a closed socket is the client's doing: no error, no traceback."""
    caplog.set_level(logging.INFO)
    port = int(served.base_url.rsplit(":", 1)[1])
    headers = {"Content-Type": "application/json", "Content-Length": "1000"}
    head = "\r\n".join(
        ["POST /api/v1/login HTTP/1.1", "Host: farm"] + [f"{k}: {v}" for k, v in headers.items()]
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n\r\n" + b'{"email": "admin@')
    deadline = time.monotonic() + 30  # waits for the server to see the close; asserts nothing
    while time.monotonic() < deadline and not any(
        "closed the connection" in r.getMessage() for r in caplog.records
    ):
        time.sleep(0.05)
    said = [r for r in caplog.records if "closed the connection" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO, caplog.text
    assert "POST /api/v1/login" in said[0].getMessage()
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert not noisy, caplog.text
    assert "Traceback" not in caplog.text
