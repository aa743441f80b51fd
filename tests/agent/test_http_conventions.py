"""docs/design.md 3: one error envelope from every layer, request ids, body limits, rates."""

from __future__ import annotations

import io
import re
import uuid

import pytest

ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def assert_envelope(body: dict, code: str) -> None:
    assert set(body) == {"success", "error", "timestamp", "request_id"}
    assert body["success"] is False
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert ISO_MS_Z.match(body["timestamp"])
    assert body["request_id"]


async def test_unknown_route_is_a_404_envelope(agent):
    resp = await agent.client.get("/api/v1/no-such-thing", headers=agent.auth())
    assert resp.status == 404
    assert_envelope(await resp.json(), "RESOURCE_NOT_FOUND")


async def test_wrong_method_is_a_405_envelope_with_allow(agent):
    resp = await agent.client.patch("/api/v1/farms/", headers=agent.auth())
    assert resp.status == 405
    assert_envelope(await resp.json(), "METHOD_NOT_ALLOWED")
    assert "GET" in resp.headers["Allow"] and "POST" in resp.headers["Allow"]


async def test_malformed_json_is_a_400_and_writes_nothing(agent):
    headers = {**agent.auth(), "Content-Type": "application/json"}
    resp = await agent.client.post("/api/v1/farms/", data=b'{"name": "x",', headers=headers)
    assert resp.status == 400
    assert_envelope(await resp.json(), "BAD_REQUEST")
    listing = await (await agent.client.get("/api/v1/farms/", headers=agent.auth())).json()
    assert listing["total"] == 0


async def test_wrong_content_type_is_a_400(agent):
    headers = {**agent.auth(), "Content-Type": "text/plain"}
    resp = await agent.client.post("/api/v1/farms/", data=b'{"name": "x"}', headers=headers)
    assert resp.status == 400
    assert_envelope(await resp.json(), "BAD_REQUEST")


async def test_body_over_one_mebibyte_is_a_413(agent):
    big = b'{"name": "' + b"x" * (1024 * 1024) + b'"}'
    headers = {**agent.auth(), "Content-Type": "application/json"}
    resp = await agent.client.post("/api/v1/farms/", data=io.BytesIO(big), headers=headers)
    assert resp.status == 413
    assert_envelope(await resp.json(), "PAYLOAD_TOO_LARGE")


async def test_bad_uuid_in_path_is_a_422_naming_the_parameter(agent):
    resp = await agent.client.get("/api/v1/farms/not-a-uuid", headers=agent.auth())
    assert resp.status == 422
    body = await resp.json()
    assert_envelope(body, "VALIDATION_ERROR")
    assert body["error"]["details"]["errors"] == [
        {"field": "path.farm_id", "issue": "must be a UUID"}
    ]


async def test_validation_errors_name_each_field(agent):
    resp = await agent.client.post(
        "/api/v1/farms/",
        json={"name": "", "status": "flooded", "colour": "green"},
        headers=agent.auth(),
    )
    assert resp.status == 422
    body = await resp.json()
    assert_envelope(body, "VALIDATION_ERROR")
    fields = {e["field"] for e in body["error"]["details"]["errors"]}
    assert fields == {"name", "status", "colour"}


async def test_json_that_is_not_an_object_is_a_422(agent):
    resp = await agent.client.post("/api/v1/farms/", json=[1, 2], headers=agent.auth())
    assert resp.status == 422
    assert_envelope(await resp.json(), "VALIDATION_ERROR")


@pytest.mark.parametrize("limit", ["0", "501", "-1", "ten"])
async def test_page_limit_out_of_range_is_a_422(agent, limit):
    resp = await agent.client.get(f"/api/v1/farms/?limit={limit}", headers=agent.auth())
    assert resp.status == 422
    assert_envelope(await resp.json(), "VALIDATION_ERROR")


async def test_missing_token_is_a_401_envelope(agent):
    resp = await agent.client.get("/api/v1/farms/")
    assert resp.status == 401
    assert_envelope(await resp.json(), "UNAUTHORIZED")


async def test_garbage_token_is_a_401(agent):
    resp = await agent.client.get("/api/v1/farms/", headers=agent.auth("not.a.jwt"))
    assert resp.status == 401
    assert_envelope(await resp.json(), "UNAUTHORIZED")


async def test_request_id_is_echoed_or_generated(agent):
    mine = str(uuid.uuid4())
    resp = await agent.client.get("/health", headers={"X-Request-ID": mine})
    assert resp.headers["X-Request-ID"] == mine
    resp = await agent.client.get("/api/v1/nothing")
    generated = resp.headers["X-Request-ID"]
    assert generated and (await resp.json())["request_id"] == generated


async def test_unsafe_client_request_id_is_replaced(agent):
    resp = await agent.client.get("/health", headers={"X-Request-ID": "a b\tc" * 50})
    assert resp.headers["X-Request-ID"] != "a b\tc" * 50


async def test_farms_answers_with_and_without_trailing_slash(agent):
    for path in ("/api/v1/farms", "/api/v1/farms/"):
        resp = await agent.client.get(path, headers=agent.auth(), allow_redirects=False)
        assert resp.status == 200, path


async def test_user_rate_limit_headers_and_429(make_agent):
    agent = await make_agent(rate_limit_per_user=3)
    statuses = []
    for _ in range(4):
        resp = await agent.client.get("/api/v1/farms/", headers=agent.auth())
        statuses.append(resp.status)
        assert resp.headers["X-RateLimit-Limit"] == "3"
        assert int(resp.headers["X-RateLimit-Reset"]) > 1_700_000_000
    assert statuses == [200, 200, 200, 429]
    assert resp.headers["X-RateLimit-Remaining"] == "0"
    assert int(resp.headers["Retry-After"]) >= 1
    assert_envelope(await resp.json(), "RATE_LIMITED")


async def test_anonymous_rate_limit_is_per_address(make_agent):
    # The login inside make_agent is the first anonymous request of this address.
    agent = await make_agent(rate_limit_per_address=2)
    resp = await agent.client.get("/health")
    assert resp.status == 200 and resp.headers["X-RateLimit-Remaining"] == "0"
    resp = await agent.client.get("/health")
    assert resp.status == 429
    assert_envelope(await resp.json(), "RATE_LIMITED")
