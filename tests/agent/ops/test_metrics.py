"""/metrics: Prometheus text with the agent's figures, for the allow-list or the token."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.conftest import agent_settings


async def test_metrics_from_an_allowed_address(agent):
    await agent.client.get("/api/v1/farms", headers=agent.auth())
    await agent.client.get(
        "/api/v1/farms/00000000-0000-4000-8000-000000000000", headers=agent.auth()
    )
    resp = await agent.client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    text = await resp.text()
    assert (
        'farm_agent_http_requests_total{method="GET",route="/api/v1/farms",status="200"} 1.0'
        in text
    )
    assert 'route="/api/v1/farms/{farm_id}",status="404"' in text
    assert "farm_agent_http_request_duration_seconds_bucket" in text
    for name in (
        "farm_agent_readings_ingested_total",
        'farm_agent_readings_dropped_total{reason="queue_full"}',
        "farm_agent_reading_queue_depth",
        'farm_agent_reading_commit_seconds_bucket{le="+Inf"}',
        "farm_agent_climate_actions_total",
        "farm_agent_mqtt_connected",
        "farm_agent_websocket_clients",
        "process_resident_memory_bytes",
    ):
        assert name in text, name


async def test_metrics_elsewhere_need_the_token(make_agent):
    agent = await make_agent(metrics_allowed_networks="10.9.0.0/16", metrics_token="scrape-me")
    assert (await agent.client.get("/metrics")).status == 403
    wrong = {"Authorization": "Bearer nope"}
    assert (await agent.client.get("/metrics", headers=wrong)).status == 403
    right = {"Authorization": "Bearer scrape-me"}
    resp = await agent.client.get("/metrics", headers=right)
    assert resp.status == 200 and "farm_agent_http_requests_total" in await resp.text()


async def test_scrapes_are_not_rate_limited(make_agent):
    agent = await make_agent(rate_limit_per_address=2)
    statuses = {(await agent.client.get("/metrics")).status for _ in range(5)}
    assert statuses == {200}


def test_a_bad_allow_list_is_a_settings_error(tmp_path):
    with pytest.raises(ValidationError, match="metrics_allowed_networks"):
        agent_settings(tmp_path, metrics_allowed_networks="10.0.0.0/8, not-a-network")


async def test_ingested_readings_and_commit_times_are_counted(agent):
    import re

    from agent.services.readings.writer import IncomingReading
    from agent.web.keys import DATABASE, READINGS
    from tests.support.reading_seed import add_device, add_farm, add_user

    db = agent.client.app[DATABASE]
    device_id = await add_device(db, await add_farm(db, await add_user(db)))
    writer = agent.client.app[READINGS].writer
    for i in range(10):
        writer.submit(
            IncomingReading(device_id, "ph", "pH", 6.0, received_ts=1_700_000_000_000 + i)
        )
    await writer.flush()
    text = await (await agent.client.get("/metrics")).text()
    assert re.search(r"^farm_agent_readings_ingested_total 10\.0$", text, re.MULTILINE)
    commits = re.search(r"^farm_agent_reading_commit_seconds_count (\d+)", text, re.MULTILINE)
    assert commits and int(commits[1]) >= 1
