"""/health, /healthz, /supabase-items, the OpenAPI document and the docs page."""

from __future__ import annotations

import re

from tests.support.page_headers import assert_docs_page_headers

ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


async def test_health_is_public_and_cheap(agent):
    resp = await agent.client.get("/health")
    body = await resp.json()
    assert resp.status == 200
    assert set(body) == {"status", "timestamp", "version"}
    assert body["status"] == "healthy" and ISO_MS_Z.match(body["timestamp"])


async def test_healthz_reports_real_checks_and_process_figures(agent):
    resp = await agent.client.get("/healthz")
    body = await resp.json()
    assert resp.status == 200
    assert body["status"] == "healthy"
    assert body["checks"]["database"] == "connected"
    assert {"database", "backend", "cache"} <= set(body["checks"])
    assert isinstance(body["uptime"], int) and body["uptime"] >= 0
    assert re.match(r"^\d+(\.\d+)?%$", body["memory_usage"])
    assert re.match(r"^\d+(\.\d+)?%$", body["cpu_usage"])
    assert body["memory_rss_bytes"] > 10 * 1024 * 1024


async def test_healthz_reports_a_closed_database(agent):
    from agent.web.keys import DATABASE

    await agent.client.app[DATABASE].close()
    body = await (await agent.client.get("/healthz")).json()
    assert body["status"] == "unhealthy"
    assert body["checks"]["database"] == "disconnected"


async def test_backend_items_counts_stored_records(agent):
    before = await (await agent.client.get("/supabase-items")).json()
    assert before["status"] == "connected"
    assert set(before) == {"status", "items_count", "connection_time", "last_sync"}
    await agent.client.post("/api/v1/farms/", json={"name": "A"}, headers=agent.auth())
    after = await (await agent.client.get("/supabase-items")).json()
    assert after["items_count"] == before["items_count"] + 1


async def test_openapi_document_covers_every_declared_route(agent):
    resp = await agent.client.get("/api/v1/openapi.json")
    doc = await resp.json()
    assert doc["openapi"].startswith("3.1")
    farms = doc["paths"]["/api/v1/farms/"]
    assert set(farms) == {"get", "post"}
    assert farms["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "FarmCreate" in doc["components"]["schemas"]
    assert doc["paths"]["/api/v1/login"]["post"].get("security") is None


async def test_docs_page_is_served_without_external_assets(agent):
    resp = await agent.client.get("/api/v1/docs")
    text = await resp.text()
    assert resp.status == 200 and resp.content_type == "text/html"
    assert "/api/v1/openapi.json" in text
    assert "https://" not in text


async def test_docs_page_has_the_web_apps_security_headers(agent):
    await assert_docs_page_headers(agent.client)
