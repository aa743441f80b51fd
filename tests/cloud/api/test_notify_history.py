"""GET /api/v1/notifications on the cloud: what it sent (a farm silent or back, a message its
agent handed over) for the farms the caller may read, newest first and paged, with the farm,
the contact point, the status and the service's answer; a user of one farm never sees
another's."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from tests.cloud.api.conftest import Cloud, Conn, World, assert_error, expected_farms

T0 = datetime(2026, 3, 1, 2, 14, tzinfo=UTC)


async def _contact(system: Conn, farm_id: UUID, name: str) -> UUID:
    contact_id = uuid.uuid4()
    await system.execute(
        "INSERT INTO contact_points (id, farm_id, name, service, url_sealed)"
        " VALUES ($1, $2, $3, 'ntfy', '\\x00')",
        contact_id,
        farm_id,
        name,
    )
    return contact_id


async def _sent(system: Conn, farm_id: UUID, contact_id: UUID, minute: int, **row: Any) -> UUID:
    kind = row.get("kind", "farm_silent")
    message_id: UUID = await system.fetchval(
        "INSERT INTO cloud_notifications (farm_id, contact_point_id, agent_id, silent_since,"
        " agent_notification_id, kind, title, body, status, attempts, answer, created_at,"
        " sent_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'body', $8, $9, $10, $11, $12)"
        " RETURNING id",
        farm_id,
        contact_id,
        uuid.uuid4(),
        None if kind == "handover" else T0 + timedelta(minutes=minute),
        uuid.uuid4() if kind == "handover" else None,
        kind,
        row.get("title", f"[CRITICAL] farm silent {minute}"),
        row.get("status", "sent"),
        row.get("attempts", 1),
        row.get("answer"),
        T0 + timedelta(minutes=minute),
        T0 + timedelta(minutes=minute) if row.get("status", "sent") == "sent" else None,
    )
    return message_id


async def _history(world: World, system: Conn) -> dict[str, UUID]:
    a, b = world.farm_a.farm_id, world.farm_b.farm_id
    phone_a, phone_b = await _contact(system, a, "Ana's phone"), await _contact(system, b, "Bo")
    return {
        "silent": await _sent(system, a, phone_a, 1),
        "back": await _sent(
            system, a, phone_a, 2, kind="farm_back", title="[INFO] Alice's farm: back after 9 min"
        ),
        "failed": await _sent(
            system,
            a,
            phone_a,
            3,
            kind="handover",
            title="[WARNING] pump 3 flow 0 below 1",
            status="failed",
            attempts=12,
            answer="ntfy answered 401: unauthorized",
        ),
        "theirs": await _sent(system, b, phone_b, 4),
    }


async def test_each_user_sees_what_was_sent_for_the_farms_they_may_read(
    cloud: Cloud, world: World, system: Conn
) -> None:
    ids = await _history(world, system)
    seen = {
        name: {
            n["farm_id"]
            for n in (
                await cloud.get("/api/v1/notifications", await cloud.login(world.email(name)))
            )[1]["notifications"]
        }
        for name in ("admin", "alice", "bob", "rita", "nora")
    }
    assert seen == {name: farms for name, farms in expected_farms(world).items() if name in seen}

    token = await cloud.login(world.email("rita"))  # read-only on Alice's farm
    status, page = await cloud.get("/api/v1/notifications", token)
    assert status == 200 and page["total"] == 3
    newest, back, silent = page["notifications"]
    assert [newest["id"], back["id"], silent["id"]] == [
        str(ids["failed"]),
        str(ids["back"]),
        str(ids["silent"]),
    ]
    assert newest["farm_name"] == "Alice's farm" and newest["contact_point_name"] == "Ana's phone"
    assert newest["status"] == "failed" and newest["attempts"] == 12
    assert newest["answer"] == "ntfy answered 401: unauthorized"
    assert (
        newest["message"] == "[WARNING] pump 3 flow 0 below 1" and newest["severity"] == "warning"
    )
    assert (back["kind"], back["severity"]) == ("farm_back", "info")
    assert (silent["kind"], silent["severity"], silent["status"]) == (
        "farm_silent",
        "critical",
        "sent",
    )
    assert silent["sent_at"] == "2026-03-01T02:15:00.000Z"
    assert silent["acknowledged_at"] is None and silent["event_id"] is None

    status, page = await cloud.get("/api/v1/notifications", token, limit=1, offset=1)
    assert status == 200 and page["total"] == 3 and page["limit"] == 1 and page["offset"] == 1
    assert [n["id"] for n in page["notifications"]] == [str(ids["back"])]
    status, page = await cloud.get(
        "/api/v1/notifications", token, farm_id=str(world.farm_a.farm_id), status="failed"
    )
    assert [n["id"] for n in page["notifications"]] == [str(ids["failed"])]


async def test_another_farm_is_not_found_and_bad_filters_are_refused(
    cloud: Cloud, world: World, system: Conn
) -> None:
    await _history(world, system)
    token = await cloud.login(world.email("alice"))
    status, body = await cloud.get(
        "/api/v1/notifications", token, farm_id=str(world.farm_b.farm_id)
    )
    assert status == 404
    assert_error(body, "RESOURCE_NOT_FOUND")
    for bad in ({"status": "lost"}, {"limit": 0}, {"farm_id": "north"}):
        status, body = await cloud.get("/api/v1/notifications", token, **bad)
        assert status == 422, bad
        assert_error(body, "VALIDATION_ERROR")
    status, page = await cloud.get("/api/v1/notifications", token, event_id="e-1")
    assert status == 200 and page["notifications"] == [] and page["total"] == 0
    resp = await cloud.client.get("/api/v1/notifications")
    assert resp.status == 401
