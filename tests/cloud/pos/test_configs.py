"""POS configurations: CRUD, one active per owner, secrets sealed and never answered, each owner
sees only their own (row-level security, proven from SQL as the application role), and the
connection test answers what the provider said."""

from __future__ import annotations

import json
import logging
from typing import Any

import asyncpg
import pytest

from tests.cloud.api.conftest import assert_error
from tests.cloud.conftest import CloudDatabase
from tests.cloud.pos.conftest import TOKEN, FakeProvider, Owners, config_body
from tests.cloud.seed import acting_as

SECRETS = (TOKEN, "whsec-fake-signature-key")


def no_secrets(body: Any) -> None:
    text = json.dumps(body)
    for secret in SECRETS:
        assert secret not in text


async def test_configuration_crud_and_activation(owners: Owners, fake: FakeProvider) -> None:
    status, first = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    assert status == 201, first
    no_secrets(first)
    assert first["has_access_token"] and first["has_webhook_signature_key"]
    assert first["is_active"] is False
    status, second = await owners.call(
        "alice", "POST", "/api/v1/pos/configs", config_body(fake, name="Second shop")
    )
    assert status == 201

    for config in (first, second):
        status, active = await owners.call(
            "alice", "PUT", f"/api/v1/pos/configs/{config['id']}/activate"
        )
        assert status == 200 and active["is_active"]
        status, listing = await owners.call("alice", "GET", "/api/v1/pos/configs")
        assert status == 200 and listing["total"] == 2
        no_secrets(listing)
        assert [c["id"] for c in listing["configs"] if c["is_active"]] == [config["id"]]

    status, updated = await owners.call(
        "alice",
        "PUT",
        f"/api/v1/pos/configs/{first['id']}",
        {"name": "Renamed", "access_token": "another-token", "webhook_signature_key": None},
    )
    assert status == 200, updated
    assert updated["name"] == "Renamed" and not updated["has_webhook_signature_key"]
    assert "another-token" not in json.dumps(updated)

    status, _ = await owners.call("alice", "DELETE", f"/api/v1/pos/configs/{first['id']}")
    assert status == 204
    status, body = await owners.call("alice", "GET", f"/api/v1/pos/configs/{first['id']}")
    assert status == 404
    assert_error(body, "RESOURCE_NOT_FOUND")


@pytest.mark.parametrize(
    "change",
    [
        {"environment": "staging"},
        {"access_token": ""},
        # A token goes into an Authorization header: control characters are refused (issue 24).
        {"access_token": "a\nb"},
        {"access_token": "a\r\nX-Injected: 1"},
        {"access_token": "a\u0000b"},
        {"access_token": "a b"},
        {"notification_url": "ftp://x"},
        {"crop_mappings": [{"variation_id": "V", "location_id": "L", "unit": "kg"}]},
        {
            "crop_mappings": [
                {"species": "basil", "variation_id": "V", "location_id": "L", "unit": "stone"}
            ]
        },
        {"unknown": 1},
    ],
)
async def test_a_malformed_configuration_is_refused_and_changes_nothing(
    owners: Owners, fake: FakeProvider, change: dict[str, Any]
) -> None:
    status, body = await owners.call(
        "alice", "POST", "/api/v1/pos/configs", config_body(fake, **change)
    )
    assert status == 422, body
    assert_error(body, "VALIDATION_ERROR")
    no_secrets(body)
    _, listing = await owners.call("alice", "GET", "/api/v1/pos/configs")
    assert listing["total"] == 0


async def test_secrets_are_sealed_at_rest_and_never_logged(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    await owners.call("alice", "POST", "/api/v1/pos/test-connection", {"config_id": config["id"]})
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        row = await conn.fetchrow("SELECT * FROM pos_configs")
    finally:
        await conn.close(timeout=10)
    assert row is not None
    stored = repr(dict(row))
    for secret in SECRETS:
        assert secret not in stored
        assert secret.encode() not in bytes(row["access_token"])
        assert secret not in caplog.text


async def test_owners_see_only_their_own_configurations(owners: Owners, fake: FakeProvider) -> None:
    _, mine = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    path = f"/api/v1/pos/configs/{mine['id']}"
    for method, body in (("GET", None), ("PUT", {"name": "taken"}), ("DELETE", None)):
        status, answer = await owners.call("bob", method, path, body)
        assert status == 404, (method, answer)
    status, _ = await owners.call("bob", "PUT", path + "/activate")
    assert status == 404
    status, _ = await owners.call("bob", "POST", f"/api/v1/pos/sync/all/{mine['id']}")
    assert status == 404
    _, listing = await owners.call("bob", "GET", "/api/v1/pos/configs")
    assert listing["total"] == 0
    status, body = await owners.call("nora", "GET", "/api/v1/pos/configs")
    assert status == 403
    assert_error(body, "FORBIDDEN")
    _, still = await owners.call("alice", "GET", path)
    assert still["name"] == "Shop"


async def test_row_level_security_keeps_owners_apart_in_sql(
    owners: Owners, fake: FakeProvider, cloud_db: CloudDatabase
) -> None:
    _, mine = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    app = await asyncpg.connect(cloud_db.app_dsn, timeout=10)
    try:
        async with acting_as(app, owners.ids["bob"]):
            assert await app.fetchval("SELECT count(*) FROM pos_configs") == 0
            assert await app.execute("UPDATE pos_configs SET name = 'x'") == "UPDATE 0"
            assert await app.execute("DELETE FROM pos_configs") == "DELETE 0"
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await app.execute(
                    "INSERT INTO pos_objects (config_id, owner_id, resource, object_id, data)"
                    " VALUES ($1, $2, 'orders', 'x', '{}')",
                    mine["id"],
                    owners.ids["alice"],
                )
        async with acting_as(app, owners.ids["alice"]):
            assert await app.fetchval("SELECT count(*) FROM pos_configs") == 1
        async with acting_as(app, None):
            assert await app.fetchval("SELECT count(*) FROM pos_configs") == 0
    finally:
        await app.close(timeout=10)


async def test_test_connection_answers_the_merchant_or_the_providers_error(
    owners: Owners, fake: FakeProvider
) -> None:
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    status, result = await owners.call(
        "alice", "POST", "/api/v1/pos/test-connection", {"config_id": config["id"]}
    )
    assert status == 200, result
    assert result["ok"] and result["merchant"]["id"] == fake.merchant.merchant_id
    assert [loc["id"] for loc in result["locations"]] == ["L001", "L002"]
    _, after = await owners.call("alice", "GET", f"/api/v1/pos/configs/{config['id']}")
    assert after["merchant_id"] == fake.merchant.merchant_id

    status, result = await owners.call(
        "alice",
        "POST",
        "/api/v1/pos/test-connection",
        {"environment": "sandbox", "access_token": "revoked-token"},
    )
    assert status == 200
    assert result["ok"] is False
    assert result["error"]["category"] == "AUTHENTICATION_ERROR"
    assert result["error"]["code"] == "UNAUTHORIZED"
    assert "revoked-token" not in json.dumps(result)


@pytest.mark.parametrize("token", ["a\nb", "a\r\nb", "a\u0000b", "tab\tbed", "caf\u00e9"])
async def test_a_token_with_control_characters_is_a_422_everywhere(
    owners: Owners, fake: FakeProvider, token: str
) -> None:
    status, body = await owners.call(
        "alice",
        "POST",
        "/api/v1/pos/test-connection",
        {"environment": "sandbox", "access_token": token},
    )
    assert status == 422, body
    assert_error(body, "VALIDATION_ERROR")
    _, config = await owners.call("alice", "POST", "/api/v1/pos/configs", config_body(fake))
    status, body = await owners.call(
        "alice", "PUT", f"/api/v1/pos/configs/{config['id']}", {"access_token": token}
    )
    assert status == 422, body
    assert_error(body, "VALIDATION_ERROR")
    # The stored token still works.
    status, result = await owners.call(
        "alice", "POST", "/api/v1/pos/test-connection", {"config_id": config["id"]}
    )
    assert status == 200 and result["ok"], result
