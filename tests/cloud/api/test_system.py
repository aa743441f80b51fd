"""System endpoints, the published key, the API document, and the refusal to start on a
database role that could escape row-level security."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cloud.app import create_app
from cloud.store.db import UnsafeRoleError
from protocol.tokens import private_key_pem
from tests.cloud.api.conftest import Cloud, Conn, World, assert_error, cloud_settings
from tests.cloud.conftest import CloudDatabase
from tests.support.page_headers import assert_docs_page_headers


async def test_health_is_public_and_cheap(cloud: Cloud) -> None:
    resp = await cloud.client.get("/health")
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "healthy" and body["timestamp"].endswith("Z")
    # Not metered: a load balancer's health checks would spend its address's anonymous quota.
    assert "X-Request-ID" in resp.headers and "X-RateLimit-Limit" not in resp.headers


async def test_healthz_checks_both_database_paths(cloud: Cloud) -> None:
    resp = await cloud.client.get("/healthz")
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "healthy"
    assert body["checks"] == {
        "database": "connected",
        "database_user_path": "connected",
        "database_system_path": "connected",
        "backend": "connected",
        "cache": "not_configured",
        "mail": "not_configured",
    }
    assert body["memory_rss_bytes"] > 0
    assert body["memory_usage"].endswith("%") and body["cpu_usage"].endswith("%")
    assert isinstance(body["uptime"], int)


async def test_supabase_items_counts_the_mirror_and_reports_the_last_sync(
    cloud: Cloud, world: World, system: Conn
) -> None:
    resp = await cloud.client.get("/supabase-items")
    body = await resp.json()
    # Two farms, each with a row, a rack, a shelf and a device; no agent has synced yet.
    assert (body["status"], body["items_count"], body["last_sync"]) == ("connected", 10, None)
    assert isinstance(body["connection_time"], int)
    await system.execute(
        "INSERT INTO agents (name, last_seen_at) VALUES"
        " ('north', '2025-03-01T10:00:00Z'), ('south', '2025-03-02T08:30:00.25Z')"
    )
    body = await (await cloud.client.get("/supabase-items")).json()
    assert body["last_sync"] == "2025-03-02T08:30:00.250Z"


async def test_health_reports_a_lost_database(cloud: Cloud, cloud_db: CloudDatabase) -> None:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10, command_timeout=10)
    try:
        await conn.execute(f'REVOKE CONNECT ON DATABASE "{cloud_db.name}" FROM PUBLIC')
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND usename IN ('farm_app', 'farm_sync')",
            cloud_db.name,
        )
    finally:
        await conn.close(timeout=10)
    body = await (await cloud.client.get("/healthz")).json()
    assert body["status"] == "unhealthy"
    assert body["checks"]["database"] == "disconnected"
    assert body["checks"]["database_system_path"] == "disconnected"
    body = await (await cloud.client.get("/supabase-items")).json()
    assert (body["status"], body["items_count"]) == ("disconnected", 0)


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_jwks_publishes_the_key_that_verifies_cloud_tokens(
    cloud: Cloud, world: World
) -> None:
    resp = await cloud.client.get("/.well-known/jwks.json")
    assert resp.status == 200
    [jwk] = (await resp.json())["keys"]
    assert {k: jwk[k] for k in ("kty", "crv", "alg", "use")} == {
        "kty": "OKP",
        "crv": "Ed25519",
        "alg": "EdDSA",
        "use": "sig",
    }
    assert len(_b64url_decode(jwk["x"])) == 32 and "=" not in jwk["x"]

    token = await cloud.login("alice@example.com")
    assert jwt.get_unverified_header(token)["kid"] == jwk["kid"]
    # PyJWT's own JWK parser, not ours, reads the published key.
    claims = jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["EdDSA"], issuer="farm-cloud")
    assert claims["sub"] == str(world.users["alice"])
    # A token from any other key fails against it.
    other = jwt.encode(
        {**claims}, Ed25519PrivateKey.generate(), algorithm="EdDSA", headers={"kid": jwk["kid"]}
    )
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(other, jwt.PyJWK(jwk).key, algorithms=["EdDSA"], issuer="farm-cloud")


async def test_the_signing_key_can_come_from_the_environment(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World
) -> None:
    key = Ed25519PrivateKey.generate()
    cloud = await make_cloud(signing_key=private_key_pem(key).decode(), signing_key_path=None)
    jwk = (await (await cloud.client.get("/.well-known/jwks.json")).json())["keys"][0]
    token = await cloud.login("bob@example.com")
    assert jwt.decode(token, key.public_key(), algorithms=["EdDSA"], issuer="farm-cloud")
    assert jwt.PyJWK(jwk).key.public_bytes_raw() == key.public_key().public_bytes_raw()


async def test_a_key_file_is_created_once_and_reused(
    make_cloud: Callable[..., Awaitable[Cloud]], tmp_path: Path
) -> None:
    first = await make_cloud()
    jwks = await (await first.client.get("/.well-known/jwks.json")).json()
    path = first.settings.signing_key_path
    assert path is not None and path.stat().st_mode & 0o777 == 0o600
    second = await make_cloud()
    assert await (await second.client.get("/.well-known/jwks.json")).json() == jwks


async def test_openapi_document_and_docs_page(cloud: Cloud) -> None:
    resp = await cloud.client.get("/api/v1/openapi.json")
    assert resp.status == 200
    document = await resp.json()
    assert document["openapi"] == "3.1.0"
    assert {
        "/api/v1/login",
        "/auth/login",
        "/api/v1/farms/",
        "/api/v1/farms/{farm_id}",
        "/api/v1/rows/",
        "/api/v1/racks/",
        "/api/v1/shelves/",
        "/api/v1/devices",
        "/api/v1/sensors/{sensor_id}/data",
        "/api/v1/events",
        "/health",
        "/healthz",
        "/supabase-items",
        "/.well-known/jwks.json",
    } <= set(document["paths"])
    devices = document["paths"]["/api/v1/devices"]["get"]
    assert devices["security"] and "401" in devices["responses"]
    resp = await cloud.client.get("/api/v1/docs")
    assert resp.status == 200 and resp.content_type == "text/html"


async def test_docs_page_has_the_web_apps_security_headers(cloud: Cloud) -> None:
    await assert_docs_page_headers(cloud.client)


async def test_routing_errors_use_the_envelope(cloud: Cloud) -> None:
    resp = await cloud.client.get("/api/v1/nothing-here", headers={"X-Request-ID": "abc-123"})
    assert resp.status == 404
    body = await resp.json()
    assert_error(body, "RESOURCE_NOT_FOUND")
    assert body["request_id"] == "abc-123" and resp.headers["X-Request-ID"] == "abc-123"
    resp = await cloud.client.delete("/health")
    assert resp.status == 405
    assert_error(await resp.json(), "METHOD_NOT_ALLOWED")


async def test_users_are_rate_limited_per_minute(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World
) -> None:
    cloud = await make_cloud(rate_limit_per_user=2)
    token = await cloud.login("nora@example.com")
    headers = {"Authorization": f"Bearer {token}"}
    for remaining in ("1", "0"):
        resp = await cloud.client.get("/api/v1/farms/", headers=headers)
        assert resp.status == 200
        assert (resp.headers["X-RateLimit-Limit"], resp.headers["X-RateLimit-Remaining"]) == (
            "2",
            remaining,
        )
    resp = await cloud.client.get("/api/v1/farms/", headers=headers)
    assert resp.status == 429
    assert_error(await resp.json(), "RATE_LIMITED")
    assert int(resp.headers["Retry-After"]) >= 1


async def test_agents_sync_batches_are_not_held_to_the_anonymous_limit(
    make_cloud: Callable[..., Awaitable[Cloud]],
) -> None:
    # An agent uploads every few seconds; its batches authenticate by signature, not by user.
    cloud = await make_cloud(rate_limit_per_address=2)
    for _ in range(4):
        resp = await cloud.client.post("/api/v1/sync/batches", data=b"not a batch")
        assert resp.status != 429
    for _ in range(2):
        assert (await cloud.client.get("/api/v1/farms")).status == 401
    resp = await cloud.client.get("/api/v1/farms")
    assert resp.status == 429


@pytest.fixture
async def bypass_role(cloud_db: CloudDatabase) -> Any:
    """A login role with BYPASSRLS (roles are cluster-wide: unique name, dropped after)."""
    name = f"bypass_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10, command_timeout=10)
    try:
        await conn.execute(f"CREATE ROLE {name} LOGIN BYPASSRLS PASSWORD 'bypass-password'")
        yield cloud_db.dsn_as(name, "bypass-password")
    finally:
        await conn.execute(f"DROP ROLE {name}")
        await conn.close(timeout=10)


@pytest.mark.parametrize("path", ["app_dsn", "sync_dsn"])
@pytest.mark.parametrize("who", ["owner", "superuser", "bypassrls"])
async def test_the_app_refuses_to_start_on_a_role_that_escapes_rls(
    cloud_db: CloudDatabase, bypass_role: str, tmp_path: Path, path: str, who: str
) -> None:
    dsn = {"owner": cloud_db.owner_dsn, "superuser": cloud_db.superuser_dsn}.get(who, bypass_role)
    settings = cloud_settings(cloud_db, tmp_path / "key.pem", **{path: dsn})
    # What web.run_app does on start-up.
    runner = web.AppRunner(create_app(settings))
    try:
        with pytest.raises(UnsafeRoleError):
            await runner.setup()
    finally:
        await runner.cleanup()


async def test_metrics_in_prometheus_text(cloud: Cloud) -> None:
    await cloud.client.get("/health")
    resp = await cloud.client.get("/metrics")
    assert resp.status == 200
    text = await resp.text()
    assert 'farm_cloud_http_requests_total{method="GET",route="/health",status="200"}' in text
    assert "process_resident_memory_bytes" in text


async def test_reset_mail_goes_out_over_smtp(make_cloud, system) -> None:  # type: ignore[no-untyped-def]
    from tests.cloud.seed import add_user
    from tests.support.smtp_server import smtp_server

    await add_user(system, "mailme@example.com")
    with smtp_server() as (port, inbox):
        cloud = await make_cloud(smtp_host="127.0.0.1", smtp_port=port, smtp_security="none")
        health = await (await cloud.client.get("/healthz")).json()
        assert health["checks"]["mail"] == f"smtp 127.0.0.1:{port} (none)"
        resp = await cloud.client.post("/auth/reset-password", json={"email": "mailme@example.com"})
        assert resp.status == 202
        assert inbox.token_to("mailme@example.com")


async def test_without_smtp_the_cloud_says_so(cloud: Cloud) -> None:
    health = await (await cloud.client.get("/healthz")).json()
    assert health["checks"]["mail"] == "not_configured"
