"""Helpers of the farm and hierarchy API tests: callers with roles, grants, table counts."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from agent.store.users import UserStore
from agent.web.keys import DATABASE
from farmkit.passwords import hash_password
from protocol.timefmt import now_iso
from tests.conftest import Agent

ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
NOWHERE = "00000000-0000-4000-8000-000000000000"
"""A well-formed id that names nothing."""

FARM_KEYS = {"id", "name", "description", "location", "status", "created_at", "updated_at"}
ROW_KEYS = {"id", "farm_id", "name", "position", "status"}
ROW_LIST_KEYS = ROW_KEYS | {"rack_count", "shelf_count", "plant_capacity"}
RACK_KEYS = {"id", "row_id", "name", "position", "height_cm", "width_cm", "depth_cm", "status"}
SHELF_KEYS = {
    "id",
    "rack_id",
    "name",
    "level",
    "plant_capacity",
    "current_species",
    "current_plant_count",
    "status",
    "created_at",
}

_PASSWORD = "a long enough test password"


@dataclass
class Caller:
    """A logged-in user other than the fixture's admin."""

    user_id: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        """Authorization header of this caller."""
        return {"Authorization": f"Bearer {self.token}"}


async def make_user(agent: Agent, role: str) -> Caller:
    """Create a user with ``role`` straight in the store, and log them in."""
    email = f"{role}-{uuid.uuid4().hex[:8]}@farm.test"
    users = UserStore(agent.client.app[DATABASE])
    row = await users.create(email=email, password_hash=hash_password(_PASSWORD), role=role)
    resp = await agent.client.post("/api/v1/login", json={"email": email, "password": _PASSWORD})
    assert resp.status == 200, await resp.text()
    return Caller(row["id"], (await resp.json())["access_token"])


async def grant(agent: Agent, caller: Caller, farm_id: str, permission_type: str) -> None:
    """Give ``caller`` a per-farm permission, as the permissions API would."""
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "INSERT INTO permissions (id, user_id, farm_id, permission_type, granted_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), caller.user_id, farm_id, permission_type, now_iso()),
        )


async def add_device(agent: Agent, farm_id: str, name: str, device_type: str) -> str:
    """Register a device on a farm directly in the store (the devices API is another issue)."""
    device_id = str(uuid.uuid4())
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "INSERT INTO devices (id, farm_id, name, kind, device_type, status, created_at,"
            " updated_at) VALUES (?, ?, ?, 'sensor', ?, 'online', ?, ?)",
            (device_id, farm_id, name, device_type, now_iso(), now_iso()),
        )
    return device_id


async def table_counts(agent: Agent) -> dict[str, int]:
    """The number of rows in every data table of the agent's database.

    The sync outbox is left out: it is a change log, and a delete rightly adds to it.
    """
    db = agent.client.app[DATABASE]
    names = [
        row[0]
        for row in await db.fetch_all(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE 'outbox%'"
        )
    ]
    return {name: int(await db.fetch_value(f'SELECT count(*) FROM "{name}"')) for name in names}


async def dangling_references(agent: Agent) -> list[Any]:
    """Rows whose foreign keys point nowhere (empty when nothing is orphaned)."""
    return [
        tuple(row) for row in await agent.client.app[DATABASE].fetch_all("PRAGMA foreign_key_check")
    ]


async def send(
    agent: Agent,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    expect: int,
) -> Any:
    """Call the API as the admin (or with ``headers``) and check the status; the JSON answer."""
    resp = await agent.client.request(
        method, path, json=body, headers=agent.auth() if headers is None else headers
    )
    text = await resp.text()
    assert resp.status == expect, f"{method} {path} {body!r}: {resp.status} {text}"
    return None if resp.status == 204 else await resp.json()


def assert_error(body: dict[str, Any], code: str) -> None:
    """``body`` is the error envelope with ``code``."""
    assert set(body) == {"success", "error", "timestamp", "request_id"}, body
    assert body["success"] is False
    assert body["error"]["code"] == code, body
    assert ISO_MS_Z.match(body["timestamp"])


def error_fields(body: dict[str, Any]) -> set[str]:
    """The field names of a validation error."""
    return {issue["field"] for issue in body["error"]["details"]["errors"]}


async def farm(agent: Agent, name: str = "North", **fields: Any) -> dict[str, Any]:
    """Create a farm as the admin."""
    result: dict[str, Any] = await send(
        agent, "POST", "/api/v1/farms/", {"name": name, **fields}, expect=201
    )
    return result


async def row(agent: Agent, farm_id: str, position: int, **fields: Any) -> dict[str, Any]:
    """Create a row as the admin."""
    body = {"farm_id": farm_id, "name": f"Row {position}", "position": position, **fields}
    result: dict[str, Any] = await send(agent, "POST", "/api/v1/rows/", body, expect=201)
    return result


async def rack(agent: Agent, row_id: str, position: int, **fields: Any) -> dict[str, Any]:
    """Create a rack as the admin."""
    body = {"row_id": row_id, "name": f"Rack {position}", "position": position, **fields}
    result: dict[str, Any] = await send(agent, "POST", "/api/v1/racks/", body, expect=201)
    return result


async def shelf(agent: Agent, rack_id: str, level: int, **fields: Any) -> dict[str, Any]:
    """Create a shelf as the admin."""
    body = {"rack_id": rack_id, "name": f"Shelf {level}", "level": level, **fields}
    result: dict[str, Any] = await send(agent, "POST", "/api/v1/shelves/", body, expect=201)
    return result
