"""/api/v1/alert-rules: validation, permissions, list filters and replacement."""

from __future__ import annotations

from typing import Any

import pytest

from agent.web.keys import DATABASE
from tests.agent.devices_api.conftest import create_farm, login_as
from tests.conftest import Agent
from tests.support.reading_seed import add_device

NOWHERE = "00000000-0000-4000-8000-000000000000"


def rule(device_id: str, **fields: Any) -> dict[str, Any]:
    """A valid rule body on ``device_id``, with ``fields`` changed."""
    return {"device_id": device_id, "metric": "temperature", "above": 30.0, **fields}


@pytest.mark.parametrize(
    "change",
    [
        {"above": None},  # neither threshold
        {"below": 31.0},  # below above above
        {"below": 20.0, "hysteresis": 5.0},  # clearing bands overlap (25 >= 25)
        {"hysteresis": -1},
        {"min_duration_s": -1},
        {"severity": "loud"},
        {"metric": ""},
        {"colour": "red"},  # unknown field
        {"device_id": "probe"},
    ],
)
async def test_a_bad_rule_is_a_422_and_stores_nothing(agent: Agent, change: dict[str, Any]) -> None:
    farm_id = await create_farm(agent)
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    resp = await agent.client.post(
        "/api/v1/alert-rules", json=rule(device_id) | change, headers=agent.auth()
    )
    assert resp.status == 422, await resp.text()
    assert (await resp.json())["error"]["code"] == "VALIDATION_ERROR"
    count = await agent.client.app[DATABASE].fetch_value("SELECT count(*) FROM alert_rules")
    assert count == 0


async def test_a_rule_on_an_unknown_device_is_a_404_and_stores_nothing(agent: Agent) -> None:
    resp = await agent.client.post("/api/v1/alert-rules", json=rule(NOWHERE), headers=agent.auth())
    assert resp.status == 404, await resp.text()
    assert (await resp.json())["error"]["code"] == "RESOURCE_NOT_FOUND"
    count = await agent.client.app[DATABASE].fetch_value("SELECT count(*) FROM alert_rules")
    assert count == 0


async def test_rules_are_created_listed_replaced_and_deleted(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    other_farm = await create_farm(agent, "South")
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    other_device = await add_device(agent.client.app[DATABASE], other_farm)
    body = rule(device_id, below=10.0, hysteresis=1.0, min_duration_s=60, severity="critical")
    resp = await agent.client.post("/api/v1/alert-rules", json=body, headers=agent.auth())
    assert resp.status == 201, await resp.text()
    created = await resp.json()
    assert created["farm_id"] == farm_id
    assert (created["above"], created["below"], created["enabled"]) == (30.0, 10.0, True)
    await agent.client.post("/api/v1/alert-rules", json=rule(other_device), headers=agent.auth())

    resp = await agent.client.get(
        "/api/v1/alert-rules", params={"farm_id": farm_id}, headers=agent.auth()
    )
    listed = await resp.json()
    assert (listed["total"], [r["id"] for r in listed["alert_rules"]]) == (1, [created["id"]])

    url = f"/api/v1/alert-rules/{created['id']}"
    resp = await agent.client.put(url, json=rule(device_id, enabled=False), headers=agent.auth())
    assert resp.status == 200, await resp.text()
    replaced = await resp.json()
    assert (replaced["below"], replaced["enabled"], replaced["severity"]) == (
        None,
        False,
        "warning",
    )

    assert (await agent.client.delete(url, headers=agent.auth())).status == 204
    assert (await agent.client.delete(url, headers=agent.auth())).status == 404
    assert (await agent.client.put(url, json=rule(device_id), headers=agent.auth())).status == 404


async def test_changing_rules_needs_write_access_to_the_farm(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    resp = await agent.client.post(
        "/api/v1/alert-rules", json=rule(device_id), headers=agent.auth()
    )
    url = f"/api/v1/alert-rules/{(await resp.json())['id']}"

    reader = await login_as(agent, "operator", farm_id, "read_only")
    analyst = await login_as(agent, "analyst", farm_id, "read_write")
    for token in (reader, analyst):
        resp = await agent.client.post(
            "/api/v1/alert-rules", json=rule(device_id), headers=agent.auth(token)
        )
        assert resp.status == 403
        assert (await agent.client.delete(url, headers=agent.auth(token))).status == 403
        listed = await agent.client.get("/api/v1/alert-rules", headers=agent.auth(token))
        assert (await listed.json())["total"] == 1

    stranger = await login_as(agent, "operator")
    assert (await agent.client.delete(url, headers=agent.auth(stranger))).status == 404
    resp = await agent.client.post(
        "/api/v1/alert-rules", json=rule(device_id), headers=agent.auth(stranger)
    )
    assert resp.status == 404  # a device the caller cannot see does not exist for them
    listed = await agent.client.get("/api/v1/alert-rules", headers=agent.auth(stranger))
    assert (await listed.json())["total"] == 0

    operator = await login_as(agent, "operator", farm_id, "read_write")
    resp = await agent.client.post(
        "/api/v1/alert-rules", json=rule(device_id), headers=agent.auth(operator)
    )
    assert resp.status == 201
