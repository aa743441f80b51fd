"""The web app as served: the page with a strict CSP, immutable gzipped assets, no rate limit."""

from __future__ import annotations

import gzip
import re

from tests.conftest import Agent
from webui import WebUi


async def test_the_page_is_served_at_the_root_with_a_strict_policy(agent: Agent) -> None:
    resp = await agent.client.get("/")
    assert resp.status == 200 and resp.content_type == "text/html"
    policy = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    assert resp.headers["Cache-Control"] == "no-cache"
    page = await resp.text()
    assert '<meta name="farm-service" content="agent">' in page
    assert "<script>" not in page and "style=" not in page  # nothing the policy would block


async def test_assets_are_gzipped_immutable_and_revalidated_by_etag(agent: Agent) -> None:
    page = await (await agent.client.get("/")).text()
    script = re.search(r'src="(/ui/[0-9a-f]+/js/app\.js)"', page)
    assert script is not None
    resp = await agent.client.get(
        script.group(1), headers={"Accept-Encoding": "gzip"}, auto_decompress=False
    )
    assert resp.status == 200 and resp.headers["Content-Encoding"] == "gzip"
    assert resp.content_type == "text/javascript"
    assert "immutable" in resp.headers["Cache-Control"]
    assert b"import" in gzip.decompress(await resp.read())
    cached = await agent.client.get(
        script.group(1), headers={"If-None-Match": resp.headers["ETag"]}
    )
    assert cached.status == 304


async def test_an_asset_of_an_older_build_is_not_cached_for_ever(agent: Agent) -> None:
    resp = await agent.client.get("/ui/000000000000/js/app.js")
    assert resp.status == 200 and resp.headers["Cache-Control"] == "no-cache"


async def test_an_unknown_asset_is_a_404_in_the_envelope(agent: Agent) -> None:
    resp = await agent.client.get("/ui/x/nope.js")
    assert resp.status == 404
    assert (await resp.json())["error"]["code"] == "RESOURCE_NOT_FOUND"


async def test_loading_the_app_spends_no_rate_limit(make_agent: object) -> None:
    agent = await make_agent(rate_limit_per_address=3)  # type: ignore[operator]
    for _ in range(10):
        assert (await agent.client.get("/")).status == 200
        assert (await agent.client.get("/ui/x/app.css")).status == 200


def test_all_assets_together_stay_under_300_kb_compressed() -> None:
    ui = WebUi.load()
    total = ui.total_gzipped()
    print(f"web app: {len(ui.assets) + 1} files, {total} bytes gzipped")
    assert total <= 300 * 1024


async def test_the_openapi_document_describes_the_streams(agent: Agent) -> None:
    doc = await (await agent.client.get("/api/v1/openapi.json")).json()
    streams = doc["x-streams"]
    assert set(streams["streams"]) == {"/ws/farm-status", "/ws/sensor-data", "/ws/device-events"}
    assert set(streams["close_codes"]) == {"4401", "4403", "4429"}
    kinds = {
        variant["properties"]["type"]["const"]
        for variant in streams["client_messages"]["$defs"].values()
    }
    assert kinds == {"auth", "subscribe", "ping"}
