"""Farms: list with metrics, search and paging; detail; create; update; delete."""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests.agent.hierarchy_helpers import (
    FARM_KEYS,
    ISO_MS_Z,
    NOWHERE,
    add_device,
    assert_error,
    dangling_references,
    error_fields,
    farm,
    grant,
    make_user,
    rack,
    row,
    send,
    shelf,
    table_counts,
)
from tests.conftest import Agent

FARMS = "/api/v1/farms/"


async def test_create_answers_201_with_the_spec_fields(agent: Agent) -> None:
    body = {"name": "North", "description": "Lettuce", "location": "Shed 1", "status": "active"}
    created = await send(agent, "POST", FARMS, body, expect=201)
    assert set(created) == FARM_KEYS
    assert {k: created[k] for k in body} == body
    assert ISO_MS_Z.match(created["created_at"]) and created["updated_at"] == created["created_at"]


async def test_create_fills_optional_fields(agent: Agent) -> None:
    created = await send(agent, "POST", "/api/v1/farms", {"name": "Bare"}, expect=201)
    assert (created["description"], created["location"], created["status"]) == ("", "", "active")


async def test_list_metrics_are_counted_from_the_hierarchy(agent: Agent) -> None:
    north, empty = await farm(agent, "North"), await farm(agent, "Empty")
    row_a, row_b = await row(agent, north["id"], 1), await row(agent, north["id"], 2)
    rack_a1, rack_a2 = await rack(agent, row_a["id"], 1), await rack(agent, row_a["id"], 2)
    rack_b1 = await rack(agent, row_b["id"], 1)
    counts = []
    for rack_id, level, status, plants in (
        (rack_a1["id"], 0, "active", 12),
        (rack_a1["id"], 1, "active", 3),
        (rack_a2["id"], 0, "maintenance", 5),  # not active: its plants are not counted
        (rack_b1["id"], 0, "active", 0),
    ):
        made = await shelf(agent, rack_id, level, plant_capacity=20, status=status)
        counts.append(
            await send(
                agent,
                "PUT",
                f"/api/v1/shelves/{made['id']}",
                {"current_plant_count": plants},
                expect=200,
            )
        )

    listing = await send(agent, "GET", FARMS, expect=200)
    assert set(listing) == {"farms", "total", "limit", "offset"}
    assert (listing["total"], listing["limit"], listing["offset"]) == (2, 50, 0)
    by_name = {item["name"]: item for item in listing["farms"]}
    assert all(set(item) == FARM_KEYS | {"metrics"} for item in listing["farms"])
    assert by_name["North"]["metrics"] == {
        "total_rows": 2,
        "total_racks": 3,
        "total_shelves": 4,
        "active_plants": 15,
    }
    assert by_name["Empty"]["metrics"] == {
        "total_rows": 0,
        "total_racks": 0,
        "total_shelves": 0,
        "active_plants": 0,
    }
    assert by_name["Empty"]["id"] == empty["id"]


async def test_search_matches_names_case_insensitively_and_literally(agent: Agent) -> None:
    for name in ("North Shed", "south field", "100% Basil", "Under_score"):
        await farm(agent, name)

    async def names(search: str) -> set[str]:
        listing = await send(agent, "GET", FARMS + "?search=" + search, expect=200)
        assert listing["total"] == len(listing["farms"])
        return {item["name"] for item in listing["farms"]}

    assert await names("NORTH") == {"North Shed"}
    assert await names("sh") == {"North Shed"}
    assert await names("%25") == {"100% Basil"}  # a literal percent sign, not a wildcard
    assert await names("h_f") == set()  # a literal underscore: "south field" must not match
    assert await names("_") == {"Under_score"}
    assert await names("nothing like it") == set()


async def test_limit_and_offset_page_through_all_farms(agent: Agent) -> None:
    made = {(await farm(agent, f"Farm {i}"))["id"] for i in range(5)}
    seen: list[str] = []
    for offset in (0, 2, 4):
        page = await send(agent, "GET", f"{FARMS}?limit=2&offset={offset}", expect=200)
        assert (page["total"], page["limit"], page["offset"]) == (5, 2, offset)
        seen += [item["id"] for item in page["farms"]]
    assert len(seen) == 5 and set(seen) == made
    beyond = await send(agent, "GET", f"{FARMS}?offset=10", expect=200)
    assert beyond["farms"] == [] and beyond["total"] == 5


async def test_the_cached_list_answers_every_change_at_once(agent: Agent) -> None:
    """The list is cached and rendered once per change: a read right after a write sees it."""
    north = await farm(agent, "North")
    rack_id = (await rack(agent, (await row(agent, north["id"], 1))["id"], 1))["id"]
    for step in range(1, 4):
        await send(agent, "PUT", f"{FARMS}{north['id']}", {"name": f"North {step}"}, expect=200)
        await shelf(agent, rack_id, step)
        listing = await send(agent, "GET", FARMS, expect=200)
        assert await send(agent, "GET", FARMS, expect=200) == listing  # from the cache
        (item,) = listing["farms"]
        assert (item["name"], item["metrics"]["total_shelves"]) == (f"North {step}", step)


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "limit=ten", "offset=-1", "offset=1.5", "search=" + "x" * 201]
)
async def test_out_of_range_list_query_is_a_422(agent: Agent, query: str) -> None:
    body = await send(agent, "GET", f"{FARMS}?{query}", expect=422)
    assert_error(body, "VALIDATION_ERROR")
    assert error_fields(body) == {"query." + query.split("=")[0]}


async def test_detail_has_rows_by_position_and_devices(agent: Agent) -> None:
    north = await farm(agent, "North")
    second = await row(agent, north["id"], 2, status="maintenance")
    first = await row(agent, north["id"], 1)
    device_id = await add_device(agent, north["id"], "Probe", "ph_sensor")
    other = await farm(agent, "Other")
    await row(agent, other["id"], 1)

    detail = await send(agent, "GET", f"{FARMS}{north['id']}", expect=200)
    assert set(detail) == FARM_KEYS | {"rows", "devices"}
    assert detail["rows"] == [
        {"id": first["id"], "name": "Row 1", "position": 1, "status": "active"},
        {"id": second["id"], "name": "Row 2", "position": 2, "status": "maintenance"},
    ]
    assert detail["devices"] == [
        {"id": device_id, "name": "Probe", "type": "ph_sensor", "status": "online"}
    ]


async def test_put_replaces_only_the_given_fields(agent: Agent) -> None:
    created = await farm(agent, "North", description="Lettuce", location="Shed 1")
    path = f"{FARMS}{created['id']}"
    updated = await send(agent, "PUT", path, {"status": "maintenance"}, expect=200)
    assert set(updated) == FARM_KEYS
    assert updated["status"] == "maintenance"
    unchanged = ("id", "name", "description", "location", "created_at")
    assert {k: updated[k] for k in unchanged} == {k: created[k] for k in unchanged}
    assert updated["updated_at"] >= created["updated_at"]

    body = {"name": "South", "description": "", "location": "Shed 2"}
    updated = await send(agent, "PUT", path, body, expect=200)
    assert {k: updated[k] for k in body} == body and updated["status"] == "maintenance"
    detail = await send(agent, "GET", path, expect=200)
    assert {k: detail[k] for k in FARM_KEYS} == updated


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"body"}),
        ({"name": None}, {"name"}),
        ({"status": None}, {"status"}),
        ({"description": None, "location": None}, {"description", "location"}),
        ({"name": ""}, {"name"}),
        ({"name": 7}, {"name"}),
        ({"status": "flooded"}, {"status"}),
        ({"id": "11111111-1111-4111-8111-111111111111"}, {"id"}),
        ({"colour": "green"}, {"colour"}),
    ],
)
async def test_bad_put_is_a_422_and_changes_nothing(
    agent: Agent, body: dict[str, Any], fields: set[str]
) -> None:
    created = await farm(agent, "North")
    answer = await send(agent, "PUT", f"{FARMS}{created['id']}", body, expect=422)
    assert_error(answer, "VALIDATION_ERROR")
    assert error_fields(answer) == fields
    stored = await send(agent, "GET", f"{FARMS}{created['id']}", expect=200)
    assert {k: stored[k] for k in FARM_KEYS} == created


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"name"}),
        ({"description": "no name"}, {"name"}),
        ({"name": "   "}, {"name"}),
        ({"name": "x" * 201}, {"name"}),
        ({"name": ["North"]}, {"name"}),
        ({"name": "North", "description": 3}, {"description"}),
        ({"name": "North", "location": "x" * 201}, {"location"}),
        ({"name": "North", "status": "flooded"}, {"status"}),
        ({"name": "North", "status": "ACTIVE"}, {"status"}),
        ({"name": "North", "owner": "me"}, {"owner"}),
        (["North"], {"body"}),
    ],
)
async def test_bad_create_is_a_422_and_writes_nothing(
    agent: Agent, body: Any, fields: set[str]
) -> None:
    answer = await send(agent, "POST", FARMS, body, expect=422)
    assert_error(answer, "VALIDATION_ERROR")
    assert error_fields(answer) == fields
    assert (await send(agent, "GET", FARMS, expect=200))["total"] == 0


@pytest.mark.parametrize("status", ["active", "maintenance", "inactive", "archived"])
async def test_every_documented_status_is_accepted(agent: Agent, status: str) -> None:
    created = await farm(agent, "North", status=status)
    assert created["status"] == status


async def test_malformed_json_wrong_type_and_oversized_bodies(agent: Agent) -> None:
    created = await farm(agent, "North")
    c, path = agent.client, f"{FARMS}{created['id']}"
    json_headers = {**agent.auth(), "Content-Type": "application/json"}
    for method, url in (("POST", FARMS), ("PUT", path)):
        resp = await c.request(method, url, data=b'{"name": "x",', headers=json_headers)
        assert resp.status == 400, (method, await resp.text())
        assert_error(await resp.json(), "BAD_REQUEST")
        text_headers = {**agent.auth(), "Content-Type": "text/plain"}
        resp = await c.request(method, url, data=b'{"name": "x"}', headers=text_headers)
        assert resp.status == 400, (method, await resp.text())
        assert_error(await resp.json(), "BAD_REQUEST")
        big = io.BytesIO(b'{"name": "' + b"x" * (1024 * 1024) + b'"}')
        resp = await c.request(method, url, data=big, headers=json_headers)
        assert resp.status == 413, (method, await resp.text())
        assert_error(await resp.json(), "PAYLOAD_TOO_LARGE")
    listing = await send(agent, "GET", FARMS, expect=200)
    assert listing["total"] == 1 and listing["farms"][0]["name"] == "North"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_bad_uuid_in_path_is_a_422(agent: Agent, method: str) -> None:
    body = {"name": "x"} if method == "PUT" else None
    answer = await send(agent, method, f"{FARMS}not-a-uuid", body, expect=422)
    assert_error(answer, "VALIDATION_ERROR")
    assert error_fields(answer) == {"path.farm_id"}


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_unknown_farm_is_a_404(agent: Agent, method: str) -> None:
    body = {"name": "x"} if method == "PUT" else None
    answer = await send(agent, method, f"{FARMS}{NOWHERE}", body, expect=404)
    assert_error(answer, "RESOURCE_NOT_FOUND")


async def test_every_endpoint_needs_authentication(agent: Agent) -> None:
    created = await farm(agent, "North")
    path = f"{FARMS}{created['id']}"
    for method, url, body in (
        ("GET", FARMS, None),
        ("POST", FARMS, {"name": "x"}),
        ("GET", path, None),
        ("PUT", path, {"name": "x"}),
        ("DELETE", path, None),
    ):
        answer = await send(agent, method, url, body, headers={}, expect=401)
        assert_error(answer, "UNAUTHORIZED")
        bad = {"Authorization": "Bearer not.a.token"}
        assert_error(await send(agent, method, url, body, headers=bad, expect=401), "UNAUTHORIZED")
    assert (await send(agent, "GET", path, expect=200))["name"] == "North"


async def test_farms_without_a_permission_are_invisible(agent: Agent) -> None:
    hidden = await farm(agent, "Hidden")
    outsider = await make_user(agent, "farm_manager")
    h = outsider.headers
    listing = await send(agent, "GET", FARMS, headers=h, expect=200)
    assert (listing["farms"], listing["total"]) == ([], 0)
    path = f"{FARMS}{hidden['id']}"
    assert_error(await send(agent, "GET", path, headers=h, expect=404), "RESOURCE_NOT_FOUND")
    await send(agent, "PUT", path, {"name": "Mine"}, headers=h, expect=404)
    await send(agent, "DELETE", path, headers=h, expect=404)
    assert (await send(agent, "GET", path, expect=200))["name"] == "Hidden"


async def test_creator_holds_read_write_and_others_see_only_granted_farms(agent: Agent) -> None:
    manager = await make_user(agent, "farm_manager")
    other_manager = await make_user(agent, "farm_manager")
    own = await send(agent, "POST", FARMS, {"name": "Own"}, headers=manager.headers, expect=201)
    await send(agent, "POST", FARMS, {"name": "Theirs"}, headers=other_manager.headers, expect=201)
    await farm(agent, "Admin's")

    listing = await send(agent, "GET", FARMS, headers=manager.headers, expect=200)
    assert [item["name"] for item in listing["farms"]] == ["Own"] and listing["total"] == 1
    path = f"{FARMS}{own['id']}"
    await send(agent, "PUT", path, {"status": "maintenance"}, headers=manager.headers, expect=200)
    assert (await send(agent, "GET", FARMS, expect=200))["total"] == 3  # the admin sees all
    await send(agent, "DELETE", path, headers=manager.headers, expect=204)
    await send(agent, "GET", path, expect=404)


async def test_read_only_and_weak_roles_are_forbidden_to_write(agent: Agent) -> None:
    created = await farm(agent, "North")
    path = f"{FARMS}{created['id']}"
    reader = await make_user(agent, "farm_manager")
    await grant(agent, reader, created["id"], "read_only")
    operator = await make_user(agent, "operator")
    await grant(agent, operator, created["id"], "read_write")
    for caller in (reader, operator):
        h = caller.headers
        assert (await send(agent, "GET", path, headers=h, expect=200))["name"] == "North"
        listing = await send(agent, "GET", FARMS, headers=h, expect=200)
        assert [item["id"] for item in listing["farms"]] == [created["id"]]
        answer = await send(agent, "PUT", path, {"name": "Taken"}, headers=h, expect=403)
        assert_error(answer, "FORBIDDEN")
        assert_error(await send(agent, "DELETE", path, headers=h, expect=403), "FORBIDDEN")
    writer = await make_user(agent, "farm_manager")
    await grant(agent, writer, created["id"], "read_write")
    await send(agent, "PUT", path, {"name": "Renamed"}, headers=writer.headers, expect=200)
    assert (await send(agent, "GET", path, expect=200))["name"] == "Renamed"


@pytest.mark.parametrize("role", ["operator", "analyst", "user"])
async def test_only_admins_and_farm_managers_create_farms(agent: Agent, role: str) -> None:
    caller = await make_user(agent, role)
    answer = await send(agent, "POST", FARMS, {"name": "x"}, headers=caller.headers, expect=403)
    assert_error(answer, "FORBIDDEN")
    assert (await send(agent, "GET", FARMS, expect=200))["total"] == 0


async def test_delete_removes_everything_below_and_orphans_nothing(agent: Agent) -> None:
    keep = await farm(agent, "Keep")
    await shelf(agent, (await rack(agent, (await row(agent, keep["id"], 1))["id"], 1))["id"], 0)
    reader = await make_user(agent, "user")
    before = await table_counts(agent)

    doomed = await farm(agent, "Doomed")
    for position in (1, 2):
        made_row = await row(agent, doomed["id"], position)
        for rack_position in (1, 2):
            made_rack = await rack(agent, made_row["id"], rack_position)
            for level in (0, 1):
                await shelf(agent, made_rack["id"], level, plant_capacity=4)
    await add_device(agent, doomed["id"], "Probe", "temperature_humidity")
    await grant(agent, reader, doomed["id"], "read_only")
    during = await table_counts(agent)
    assert during["farms"] == before["farms"] + 1 and during["shelves"] == before["shelves"] + 8

    path = f"{FARMS}{doomed['id']}"
    resp = await agent.client.delete(path, headers=agent.auth())
    assert resp.status == 204 and await resp.read() == b""
    assert await table_counts(agent) == before
    assert await dangling_references(agent) == []
    await send(agent, "GET", path, expect=404)
    await send(agent, "DELETE", path, expect=404)
    listing = await send(agent, "GET", FARMS, expect=200)
    assert [item["name"] for item in listing["farms"]] == ["Keep"]
    assert listing["farms"][0]["metrics"]["total_shelves"] == 1
