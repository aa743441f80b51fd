"""Rows, racks, shelves: paged lists under a parent, create, update, cascading delete."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pytest

from tests.agent.hierarchy_helpers import (
    ISO_MS_Z,
    NOWHERE,
    RACK_KEYS,
    ROW_KEYS,
    ROW_LIST_KEYS,
    SHELF_KEYS,
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


@dataclass(frozen=True)
class Level:
    """What the tests need to know of one level's endpoints."""

    plural: str
    parent: str
    slot: str
    keys: set[str]

    @property
    def root(self) -> str:
        return f"/api/v1/{self.plural}/"


ROWS = Level("rows", "farm_id", "position", ROW_KEYS)
RACKS = Level("racks", "row_id", "position", RACK_KEYS)
SHELVES = Level("shelves", "rack_id", "level", SHELF_KEYS)
LEVELS = (ROWS, RACKS, SHELVES)


@dataclass
class Tree:
    """One farm with one row, rack and shelf."""

    farm: dict[str, Any]
    row: dict[str, Any]
    rack: dict[str, Any]
    shelf: dict[str, Any]

    def item(self, level: Level) -> dict[str, Any]:
        """The item of ``level``."""
        return {"rows": self.row, "racks": self.rack, "shelves": self.shelf}[level.plural]

    def parent_id(self, level: Level) -> str:
        """The id of the parent of ``level``'s item."""
        return str(self.item(level)[level.parent])

    def create_body(self, level: Level, slot: int = 5) -> dict[str, Any]:
        """A valid create body under this tree's parent of ``level``."""
        return {level.parent: self.parent_id(level), "name": "New", level.slot: slot}


async def make_tree(agent: Agent, name: str = "North") -> Tree:
    made_farm = await farm(agent, name)
    made_row = await row(agent, made_farm["id"], 1)
    made_rack = await rack(agent, made_row["id"], 1, height_cm=200, width_cm=120.5, depth_cm=60)
    made_shelf = await shelf(
        agent, made_rack["id"], 0, plant_capacity=10, current_species="lettuce"
    )
    return Tree(made_farm, made_row, made_rack, made_shelf)


async def listing(agent: Agent, level: Level, parent_id: str, **kw: Any) -> dict[str, Any]:
    query = "&".join(f"{k}={v}" for k, v in {level.parent: parent_id, **kw}.items())
    result: dict[str, Any] = await send(agent, "GET", f"{level.root}?{query}", expect=200)
    return result


# Happy paths ----------------------------------------------------------------------------------


async def test_create_answers_201_with_the_spec_fields(agent: Agent) -> None:
    north = await farm(agent)
    made_row = await send(
        agent,
        "POST",
        "/api/v1/rows/",
        {"farm_id": north["id"], "name": "A", "position": 1, "status": "active"},
        expect=201,
    )
    assert set(made_row) == ROW_KEYS
    assert made_row["farm_id"] == north["id"] and made_row["position"] == 1

    rack_body = {
        "row_id": made_row["id"],
        "name": "A1",
        "position": 1,
        "height_cm": 200,
        "width_cm": 120.5,
        "depth_cm": 60,
        "status": "active",
    }
    made_rack = await send(agent, "POST", "/api/v1/racks", rack_body, expect=201)
    assert set(made_rack) == RACK_KEYS
    assert {k: made_rack[k] for k in rack_body} == rack_body

    shelf_body = {
        "rack_id": made_rack["id"],
        "name": "A1-0",
        "level": 0,
        "plant_capacity": 24,
        "current_species": "basil",
        "status": "active",
    }
    made_shelf = await send(agent, "POST", "/api/v1/shelves/", shelf_body, expect=201)
    assert set(made_shelf) == SHELF_KEYS
    assert {k: made_shelf[k] for k in shelf_body} == shelf_body
    assert made_shelf["current_plant_count"] == 0
    assert ISO_MS_Z.match(made_shelf["created_at"])


async def test_optional_fields_default(agent: Agent) -> None:
    north = await farm(agent)
    made_row = await row(agent, north["id"], 0)
    made_rack = await rack(agent, made_row["id"], 0)
    made_shelf = await shelf(agent, made_rack["id"], 0)
    assert made_row["status"] == made_rack["status"] == made_shelf["status"] == "active"
    assert (made_rack["height_cm"], made_rack["width_cm"], made_rack["depth_cm"]) == (None,) * 3
    assert (made_shelf["plant_capacity"], made_shelf["current_species"]) == (0, None)


async def test_row_list_counts_racks_shelves_and_capacity(agent: Agent) -> None:
    north, other = await farm(agent, "North"), await farm(agent, "Other")
    second = await row(agent, north["id"], 2)
    first = await row(agent, north["id"], 1)
    empty = await row(agent, north["id"], 3)
    await row(agent, other["id"], 1)
    for rack_position, capacities in ((1, (10, 20)), (2, (5,))):
        made_rack = await rack(agent, first["id"], rack_position)
        for level, capacity in enumerate(capacities):
            await shelf(agent, made_rack["id"], level, plant_capacity=capacity)
    await shelf(agent, (await rack(agent, second["id"], 1))["id"], 0, plant_capacity=7)

    page = await listing(agent, ROWS, north["id"])
    assert set(page) == {"rows", "total", "limit", "offset"}
    assert (page["total"], page["limit"], page["offset"]) == (3, 50, 0)
    assert all(set(item) == ROW_LIST_KEYS for item in page["rows"])
    summary = [
        (item["id"], item["rack_count"], item["shelf_count"], item["plant_capacity"])
        for item in page["rows"]
    ]
    assert summary == [(first["id"], 2, 3, 35), (second["id"], 1, 1, 7), (empty["id"], 0, 0, 0)]
    assert {k: page["rows"][0][k] for k in ROW_KEYS} == first


async def test_rack_and_shelf_lists_hold_only_their_parents_children(agent: Agent) -> None:
    tree = await make_tree(agent)
    other_row = await row(agent, tree.farm["id"], 2)
    other_rack = await rack(agent, other_row["id"], 1)
    await shelf(agent, other_rack["id"], 0)
    upper = await shelf(agent, tree.rack["id"], 3, plant_capacity=2)
    lower = await rack(agent, tree.row["id"], 0)

    racks = await listing(agent, RACKS, tree.row["id"])
    assert set(racks) == {"racks", "total", "limit", "offset"}
    assert racks["racks"] == [lower, tree.rack] and racks["total"] == 2
    shelves = await listing(agent, SHELVES, tree.rack["id"])
    assert set(shelves) == {"shelves", "total", "limit", "offset"}
    assert shelves["shelves"] == [tree.shelf, upper] and shelves["total"] == 2


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_limit_and_offset_page_through_a_list(agent: Agent, level: Level) -> None:
    tree = await make_tree(agent)
    parent_id = tree.parent_id(level)
    for slot in range(10, 14):
        await send(agent, "POST", level.root, tree.create_body(level, slot), expect=201)
    seen: list[int] = []
    for offset in (0, 2, 4):
        page = await listing(agent, level, parent_id, limit=2, offset=offset)
        assert (page["total"], page["limit"], page["offset"]) == (5, 2, offset)
        seen += [item[level.slot] for item in page[level.plural]]
    assert seen == sorted(seen) and len(set(seen)) == 5


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
@pytest.mark.parametrize("status", ["active", "inactive", "maintenance"])
async def test_every_documented_status_is_accepted(agent: Agent, level: Level, status: str) -> None:
    tree = await make_tree(agent)
    made = await send(
        agent, "POST", level.root, {**tree.create_body(level), "status": status}, expect=201
    )
    assert made["status"] == status
    item_path = f"{level.root}{tree.item(level)['id']}"
    assert (await send(agent, "PUT", item_path, {"status": status}, expect=200))["status"] == status


# PUT ------------------------------------------------------------------------------------------


async def test_put_replaces_only_the_given_fields(agent: Agent) -> None:
    tree = await make_tree(agent)
    updated = await send(
        agent, "PUT", f"/api/v1/rows/{tree.row['id']}", {"name": "Renamed"}, expect=200
    )
    assert set(updated) == ROW_KEYS and updated == {**tree.row, "name": "Renamed"}

    body = {"height_cm": None, "position": 4, "status": "maintenance"}
    updated = await send(agent, "PUT", f"/api/v1/racks/{tree.rack['id']}", body, expect=200)
    assert set(updated) == RACK_KEYS and updated == {**tree.rack, **body}

    body = {"current_species": None, "current_plant_count": 9, "name": "Top"}
    updated = await send(agent, "PUT", f"/api/v1/shelves/{tree.shelf['id']}", body, expect=200)
    assert set(updated) == SHELF_KEYS and updated == {**tree.shelf, **body}

    assert (await listing(agent, RACKS, tree.row["id"]))["racks"] == [
        {**tree.rack, "height_cm": None, "position": 4, "status": "maintenance"}
    ]
    assert (await listing(agent, SHELVES, tree.rack["id"]))["shelves"] == [updated]


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_bad_put_is_a_422_and_changes_nothing(agent: Agent, level: Level) -> None:
    tree = await make_tree(agent)
    other = await make_tree(agent, "Other")
    item = tree.item(level)
    path = f"{level.root}{item['id']}"
    cases: list[tuple[Any, set[str]]] = [
        ({}, {"body"}),
        ({level.parent: other.parent_id(level)}, {level.parent}),  # parents are immutable
        ({"id": NOWHERE}, {"id"}),
        ({"name": None}, {"name"}),
        ({"status": None}, {"status"}),
        ({level.slot: None}, {level.slot}),
        ({"name": None, "status": None}, {"name", "status"}),
        ({"name": ""}, {"name"}),
        ({"name": 12}, {"name"}),
        ({"status": "flooded"}, {"status"}),
        ({level.slot: "2"}, {level.slot}),
        ({level.slot: True}, {level.slot}),
        ({level.slot: 2.5}, {level.slot}),
        ({level.slot: -1}, {level.slot}),
        ({"colour": "green"}, {"colour"}),
        (["name"], {"body"}),
    ]
    for body, fields in cases:
        answer = await send(agent, "PUT", path, body, expect=422)
        assert_error(answer, "VALIDATION_ERROR")
        assert error_fields(answer) == fields, body
    assert (await listing(agent, level, tree.parent_id(level)))[level.plural][0] == {
        **item,
        **({"rack_count": 1, "shelf_count": 1, "plant_capacity": 10} if level is ROWS else {}),
    }


async def test_plant_count_may_not_exceed_capacity(agent: Agent) -> None:
    tree = await make_tree(agent)  # the shelf holds 10 plants
    path = f"/api/v1/shelves/{tree.shelf['id']}"
    await send(agent, "PUT", path, {"current_plant_count": 10}, expect=200)
    for body in (
        {"current_plant_count": 11},
        {"plant_capacity": 9},
        {"plant_capacity": 4, "current_plant_count": 5},
    ):
        answer = await send(agent, "PUT", path, body, expect=422)
        assert_error(answer, "VALIDATION_ERROR")
        assert error_fields(answer) == {"current_plant_count"}, body
    stored = (await listing(agent, SHELVES, tree.rack["id"]))["shelves"][0]
    assert (stored["plant_capacity"], stored["current_plant_count"]) == (10, 10)
    shrunk = await send(
        agent, "PUT", path, {"plant_capacity": 6, "current_plant_count": 6}, expect=200
    )
    assert (shrunk["plant_capacity"], shrunk["current_plant_count"]) == (6, 6)


# Uniqueness -----------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_a_taken_slot_is_a_409(agent: Agent, level: Level) -> None:
    tree = await make_tree(agent)
    other = await make_tree(agent, "Other")
    taken = tree.item(level)[level.slot]
    before = await table_counts(agent)

    answer = await send(agent, "POST", level.root, tree.create_body(level, taken), expect=409)
    assert_error(answer, "RESOURCE_EXISTS")
    assert answer["error"]["details"] == {"field": level.slot, "value": taken}
    assert await table_counts(agent) == before

    # The same slot under another parent is free.
    await send(agent, "POST", level.root, other.create_body(level, taken + 1), expect=201)
    moved = await send(agent, "POST", level.root, tree.create_body(level, taken + 1), expect=201)
    path = f"{level.root}{moved['id']}"
    answer = await send(agent, "PUT", path, {level.slot: taken}, expect=409)
    assert_error(answer, "RESOURCE_EXISTS")
    assert (await send(agent, "PUT", path, {level.slot: taken + 1}, expect=200)) == moved


# Delete ---------------------------------------------------------------------------------------


async def test_delete_cascades_down_and_orphans_nothing(agent: Agent) -> None:
    keep = await make_tree(agent, "Keep")
    baseline = await table_counts(agent)
    north = await farm(agent, "North")
    rows, racks, shelves = [], [], []
    for position in (1, 2):
        rows.append(await row(agent, north["id"], position))
        for rack_position in (1, 2):
            racks.append(await rack(agent, rows[-1]["id"], rack_position))
            for level in (0, 1):
                shelves.append(await shelf(agent, racks[-1]["id"], level, plant_capacity=3))
    full = await table_counts(agent)
    assert (full["farm_rows"], full["racks"], full["shelves"]) == (
        baseline["farm_rows"] + 2,
        baseline["racks"] + 4,
        baseline["shelves"] + 8,
    )

    async def delete(level: Level, item: dict[str, Any]) -> None:
        resp = await agent.client.delete(f"{level.root}{item['id']}", headers=agent.auth())
        assert resp.status == 204 and await resp.read() == b""
        assert_error(
            await send(agent, "DELETE", f"{level.root}{item['id']}", expect=404),
            "RESOURCE_NOT_FOUND",
        )

    await delete(SHELVES, shelves[0])
    assert (await table_counts(agent))["shelves"] == full["shelves"] - 1
    assert [s["id"] for s in (await listing(agent, SHELVES, racks[0]["id"]))["shelves"]] == [
        shelves[1]["id"]
    ]

    await delete(RACKS, racks[1])  # with its two shelves
    counts = await table_counts(agent)
    assert (counts["racks"], counts["shelves"]) == (full["racks"] - 1, full["shelves"] - 3)
    await send(agent, "GET", f"/api/v1/shelves/?rack_id={racks[1]['id']}", expect=404)

    await delete(ROWS, rows[1])  # with its two racks and four shelves
    counts = await table_counts(agent)
    assert (counts["farm_rows"], counts["racks"], counts["shelves"]) == (
        full["farm_rows"] - 1,
        full["racks"] - 3,
        full["shelves"] - 7,
    )
    assert await dangling_references(agent) == []
    metrics = {
        item["name"]: item["metrics"]
        for item in (await send(agent, "GET", "/api/v1/farms/", expect=200))["farms"]
    }
    assert metrics["North"] == {
        "total_rows": 1,
        "total_racks": 1,
        "total_shelves": 1,
        "active_plants": 0,
    }

    await delete(ROWS, rows[0])
    await send(agent, "DELETE", f"/api/v1/farms/{north['id']}", expect=204)
    assert await table_counts(agent) == baseline
    assert await dangling_references(agent) == []
    assert (await listing(agent, SHELVES, keep.rack["id"]))["shelves"] == [keep.shelf]


# Visibility and roles -------------------------------------------------------------------------


async def test_parents_that_do_not_exist_or_are_invisible_are_a_404(agent: Agent) -> None:
    tree = await make_tree(agent)  # the admin's
    manager = await make_user(agent, "farm_manager")
    h = manager.headers
    own = await send(agent, "POST", "/api/v1/farms/", {"name": "Own"}, headers=h, expect=201)
    await send(
        agent,
        "POST",
        "/api/v1/rows/",
        {"farm_id": own["id"], "name": "R", "position": 1},
        headers=h,
        expect=201,
    )
    before = await table_counts(agent)
    for level in LEVELS:
        for parent_id in (tree.parent_id(level), NOWHERE):
            body = {**tree.create_body(level), level.parent: parent_id}
            answer = await send(agent, "POST", level.root, body, headers=h, expect=404)
            assert_error(answer, "RESOURCE_NOT_FOUND")
            path = f"{level.root}?{level.parent}={parent_id}"
            answer = await send(agent, "GET", path, headers=h, expect=404)
            assert_error(answer, "RESOURCE_NOT_FOUND")
        for item_id in (tree.item(level)["id"], NOWHERE):
            path = f"{level.root}{item_id}"
            await send(agent, "PUT", path, {"name": "Mine"}, headers=h, expect=404)
            await send(agent, "DELETE", path, headers=h, expect=404)
        # The admin gets a 404 for what does not exist, too.
        body = {**tree.create_body(level), level.parent: NOWHERE}
        await send(agent, "POST", level.root, body, expect=404)
        await send(agent, "GET", f"{level.root}?{level.parent}={NOWHERE}", expect=404)
        await send(agent, "PUT", f"{level.root}{NOWHERE}", {"name": "x"}, expect=404)
    assert await table_counts(agent) == before
    # Invisible or absent, the answer is the same: existence is not disclosed.
    a = await send(agent, "GET", f"/api/v1/racks/?row_id={tree.row['id']}", headers=h, expect=404)
    b = await send(agent, "GET", f"/api/v1/racks/?row_id={NOWHERE}", headers=h, expect=404)
    assert a["error"]["message"] == b["error"]["message"] == "Row not found"


async def test_readers_and_weak_roles_may_read_but_not_write(agent: Agent) -> None:
    tree = await make_tree(agent)
    reader = await make_user(agent, "farm_manager")
    await grant(agent, reader, tree.farm["id"], "read_only")
    operator = await make_user(agent, "operator")
    await grant(agent, operator, tree.farm["id"], "read_write")
    plain = await make_user(agent, "user")
    await grant(agent, plain, tree.farm["id"], "read_write")
    before = await table_counts(agent)
    for caller in (reader, operator, plain):
        h = caller.headers
        for level in LEVELS:
            page = await send(
                agent,
                "GET",
                f"{level.root}?{level.parent}={tree.parent_id(level)}",
                headers=h,
                expect=200,
            )
            assert page["total"] == 1
            body = tree.create_body(level)
            answer = await send(agent, "POST", level.root, body, headers=h, expect=403)
            assert_error(answer, "FORBIDDEN")
            path = f"{level.root}{tree.item(level)['id']}"
            assert_error(
                await send(agent, "PUT", path, {"name": "x"}, headers=h, expect=403), "FORBIDDEN"
            )
            assert_error(await send(agent, "DELETE", path, headers=h, expect=403), "FORBIDDEN")
    assert await table_counts(agent) == before


async def test_a_farm_manager_with_read_write_manages_the_hierarchy(agent: Agent) -> None:
    tree = await make_tree(agent)
    writer = await make_user(agent, "farm_manager")
    await grant(agent, writer, tree.farm["id"], "read_write")
    h = writer.headers
    for level in (SHELVES, RACKS, ROWS):
        made = await send(agent, "POST", level.root, tree.create_body(level), headers=h, expect=201)
        path = f"{level.root}{made['id']}"
        assert (await send(agent, "PUT", path, {"name": "W"}, headers=h, expect=200))["name"] == "W"
        await send(agent, "DELETE", path, headers=h, expect=204)
    await send(agent, "DELETE", f"/api/v1/rows/{tree.row['id']}", headers=h, expect=204)
    assert (await listing(agent, ROWS, tree.farm["id"]))["total"] == 0


async def test_every_endpoint_needs_authentication(agent: Agent) -> None:
    tree = await make_tree(agent)
    before = await table_counts(agent)
    for level in LEVELS:
        item_path = f"{level.root}{tree.item(level)['id']}"
        for method, path, body in (
            ("GET", f"{level.root}?{level.parent}={tree.parent_id(level)}", None),
            ("POST", level.root, tree.create_body(level)),
            ("PUT", item_path, {"name": "x"}),
            ("DELETE", item_path, None),
        ):
            for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}):
                answer = await send(agent, method, path, body, headers=headers, expect=401)
                assert_error(answer, "UNAUTHORIZED")
    assert await table_counts(agent) == before


# Bad input ------------------------------------------------------------------------------------


def create_cases(level: Level, parent_id: str) -> list[tuple[Any, set[str]]]:
    """Bad create bodies of ``level`` and the fields their 422 must name."""
    valid = {level.parent: parent_id, "name": "New", level.slot: 5}
    cases: list[tuple[Any, set[str]]] = [
        ({k: v for k, v in valid.items() if k != field}, {field}) for field in valid
    ]
    cases += [
        ({}, set(valid)),
        ({**valid, level.parent: "not-a-uuid"}, {level.parent}),
        ({**valid, level.parent: 42}, {level.parent}),
        ({**valid, level.parent: None}, {level.parent}),
        ({**valid, "name": ""}, {"name"}),
        ({**valid, "name": "x" * 201}, {"name"}),
        ({**valid, "name": {"first": "x"}}, {"name"}),
        ({**valid, level.slot: "5"}, {level.slot}),
        ({**valid, level.slot: True}, {level.slot}),
        ({**valid, level.slot: 5.5}, {level.slot}),
        ({**valid, level.slot: -1}, {level.slot}),
        ({**valid, level.slot: 10**9}, {level.slot}),
        ({**valid, "status": "flooded"}, {"status"}),
        ({**valid, "status": None}, {"status"}),
        ({**valid, "id": NOWHERE}, {"id"}),
        ({**valid, "colour": "green"}, {"colour"}),
        ([valid], {"body"}),
        ("row", {"body"}),
    ]
    if level is RACKS:
        for field in ("height_cm", "width_cm", "depth_cm"):
            for value in (0, -3.5, 100_001, "200", True, float("nan"), float("inf")):
                cases.append(({**valid, field: value}, {field}))
    if level is SHELVES:
        for field, value in (
            ("level", 1_001),
            ("plant_capacity", -1),
            ("plant_capacity", 1_000_001),
            ("plant_capacity", 2.5),
            ("plant_capacity", "12"),
            ("current_species", "Green Basil"),
            ("current_species", ""),
            ("current_species", 7),
            ("current_plant_count", 0),  # starts at 0: not settable on create
        ):
            cases.append(({**valid, field: value}, {field}))
    return cases


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_bad_create_is_a_422_and_writes_nothing(agent: Agent, level: Level) -> None:
    tree = await make_tree(agent)
    before = await table_counts(agent)
    for body, fields in create_cases(level, tree.parent_id(level)):
        answer = await send(agent, "POST", level.root, body, expect=422)
        assert_error(answer, "VALIDATION_ERROR")
        assert error_fields(answer) == fields, body
    assert await table_counts(agent) == before


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_bad_list_query_is_a_422(agent: Agent, level: Level) -> None:
    tree = await make_tree(agent)
    parent = f"{level.parent}={tree.parent_id(level)}"
    for query, fields in (
        ("", {level.parent}),
        ("limit=10", {level.parent}),
        (f"{level.parent}=not-a-uuid", {level.parent}),
        (f"{level.parent}=", {level.parent}),
        (f"{parent}&limit=0", {"limit"}),
        (f"{parent}&limit=501", {"limit"}),
        (f"{parent}&limit=many", {"limit"}),
        (f"{parent}&offset=-1", {"offset"}),
    ):
        answer = await send(agent, "GET", f"{level.root}?{query}", expect=422)
        assert_error(answer, "VALIDATION_ERROR")
        assert error_fields(answer) == {f"query.{field}" for field in fields}, query


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_bad_uuid_in_path_is_a_422(agent: Agent, level: Level) -> None:
    param = {"rows": "row_id", "racks": "rack_id", "shelves": "shelf_id"}[level.plural]
    for method, body in (("PUT", {"name": "x"}), ("DELETE", None)):
        answer = await send(agent, method, f"{level.root}12345", body, expect=422)
        assert_error(answer, "VALIDATION_ERROR")
        assert error_fields(answer) == {f"path.{param}"}


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: level.plural)
async def test_malformed_wrong_type_and_oversized_bodies(agent: Agent, level: Level) -> None:
    tree = await make_tree(agent)
    before = await table_counts(agent)
    c = agent.client
    json_headers = {**agent.auth(), "Content-Type": "application/json"}
    text_headers = {**agent.auth(), "Content-Type": "text/plain"}
    for method, url in (("POST", level.root), ("PUT", f"{level.root}{tree.item(level)['id']}")):
        for data, headers, status, code in (
            (b'{"name": "x",', json_headers, 400, "BAD_REQUEST"),
            (b"", json_headers, 400, "BAD_REQUEST"),
            (b'{"name": "x"}', text_headers, 400, "BAD_REQUEST"),
            (b'{"name": "' + b"x" * (1024 * 1024) + b'"}', json_headers, 413, "PAYLOAD_TOO_LARGE"),
        ):
            resp = await c.request(method, url, data=io.BytesIO(data), headers=headers)
            assert resp.status == status, (method, data[:20], await resp.text())
            assert_error(await resp.json(), code)
    assert await table_counts(agent) == before
