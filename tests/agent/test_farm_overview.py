"""GET /farms/{farm_id}/overview: the whole farm in one answer (issue 32)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.web.keys import DATABASE, DEVICES
from protocol.timefmt import utcnow
from tests.agent.hierarchy_helpers import (
    add_device,
    farm,
    make_user,
    rack,
    row,
    send,
    shelf,
)
from tests.agent.streams.helpers import store_readings
from tests.conftest import Agent


async def _locate(agent: Agent, device_id: str, location: str) -> None:
    await send(agent, "PUT", f"/api/v1/devices/{device_id}", {"location": location}, expect=200)


async def _small_farm(agent: Agent) -> dict[str, Any]:
    farm_id = (await farm(agent, "Overview"))["id"]
    row_id = (await row(agent, farm_id, 1))["id"]
    rack_id = (await rack(agent, row_id, 1))["id"]
    top = (await shelf(agent, rack_id, 2, current_species="basil"))["id"]
    low = (await shelf(agent, rack_id, 1))["id"]
    ids = {}
    for name, where in (("A", "Shelf 2"), ("B", "Shelf 2"), ("R", "Rack 1"), ("F", "hall")):
        ids[name] = await add_device(agent, farm_id, name, "temperature_humidity")
        await _locate(agent, ids[name], where)
    return {"farm": farm_id, "top": top, "low": low, **ids}


async def test_one_request_aggregates_each_shelf_over_its_sensors(agent: Agent) -> None:
    f = await _small_farm(agent)
    await store_readings(
        agent,
        (f["A"], "temperature", 20.0),
        (f["B"], "temperature", 24.0),
        (f["R"], "temperature", 22.0),
        (f["A"], "co2", 800.0),
        (f["F"], "temperature", 18.0),
    )
    await agent.client.app[DEVICES].record_availability(f["B"], False, utcnow())
    body = await send(agent, "GET", f"/api/v1/farms/{f['farm']}/overview", expect=200)

    (row_view,) = body["rows"]
    (rack_view,) = row_view["racks"]
    top, low = rack_view["shelves"]
    assert (top["id"], top["crop"], low["id"]) == (f["top"], "basil", f["low"])
    temperature = next(m for m in top["metrics"] if m["metric"] == "temperature")
    # Two sensors of the shelf and the rack's sensor, which covers every shelf of its rack.
    assert (temperature["count"], temperature["min"], temperature["max"]) == (3, 20.0, 24.0)
    assert temperature["mean"] == pytest.approx(22.0)
    assert [m["metric"] for m in top["metrics"]] == ["co2", "temperature"]
    assert [s["name"] for s in top["sensors"]] == ["A", "B", "R"]
    assert [m["count"] for m in low["metrics"]] == [1]
    assert top["counts"]["devices_offline"] == 1
    assert rack_view["counts"]["devices_offline"] == 1
    assert [s["name"] for s in body["unplaced"]] == ["F"]
    assert body["offline"]["count"] == 1
    assert [(d["id"], d["name"], d["location"]) for d in body["offline"]["first"]] == [
        (f["B"], "B", "Shelf 2")
    ]
    assert body["counts"]["sensors"] == 4
    assert body["alerts"] == {"count": 0, "first": []}


async def test_offline_list_stays_short_however_many_are_offline(agent: Agent) -> None:
    farm_id = (await farm(agent, "Dark"))["id"]
    for n in range(8):
        device = await add_device(agent, farm_id, f"S{n}", "temperature_humidity")
        await agent.client.app[DEVICES].record_availability(device, False, utcnow())
    body = await send(agent, "GET", f"/api/v1/farms/{farm_id}/overview?offline_limit=3", expect=200)
    assert body["offline"]["count"] == 8
    assert [d["name"] for d in body["offline"]["first"]] == ["S0", "S1", "S2"]


async def test_a_farm_the_caller_may_not_see_is_a_404(agent: Agent) -> None:
    farm_id = (await farm(agent, "Hidden"))["id"]
    user = await make_user(agent, "user")
    await send(agent, "GET", f"/api/v1/farms/{farm_id}/overview", headers=user.headers, expect=404)
    assert await agent.client.app[DATABASE].fetch_value("SELECT count(*) FROM farms") >= 1


async def test_the_device_list_searches_filters_by_location_and_sorts(agent: Agent) -> None:
    f = await _small_farm(agent)
    await agent.client.app[DEVICES].record_availability(f["R"], False, utcnow())
    base = f"/api/v1/devices?farm_id={f['farm']}"

    async def names(query: str) -> list[str]:
        body = await send(agent, "GET", base + query, expect=200)
        return [d["name"] for d in body["devices"]]

    assert await names("&q=shelf") == ["A", "B"]  # in the location
    assert await names("&location=shelf%202&sort=-name") == ["B", "A"]
    assert await names("&status=offline") == ["R"]
    assert await names("&sort=location") == ["F", "R", "A", "B"]  # hall, Rack 1, Shelf 2
    assert await names("&q=100%25") == []  # a wildcard is a plain character
    page = await send(agent, "GET", base + "&limit=2&offset=2", expect=200)
    assert ([d["name"] for d in page["devices"]], page["total"]) == (["F", "R"], 4)
    await send(agent, "GET", base + "&sort=price", expect=422)
    sensors = await send(
        agent, "GET", f"/api/v1/sensors?farm_id={f['farm']}&q=shelf&sort=-name", expect=200
    )
    assert [s["name"] for s in sensors["sensors"]] == ["B", "A"]
