"""The mirror's writes: pages and batches of events may carry one object more than once, and a
first pull's insert may meet an object a webhook event mirrored first."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID

from cloud.store import pos_mirror
from cloud.store.db import Database
from cloud.store.pos_mirror import MirrorColumns, MirrorRow
from tests.cloud.api.conftest import Conn
from tests.cloud.seed import add_user


async def _owner_and_config(system: Conn) -> tuple[UUID, UUID]:
    """A user and a POS configuration of theirs (no secrets needed here)."""
    owner = await add_user(system, "owner@example.com", "farm_manager")
    config = await system.fetchval(
        "INSERT INTO pos_configs (owner_id, name, environment, access_token)"
        " VALUES ($1, 'Shop', 'sandbox', '\\x00') RETURNING id",
        owner,
    )
    return owner, config


def _payment(amount: int, updated_minute: int) -> MirrorRow:
    updated = datetime(2026, 3, 1, 12, updated_minute, tzinfo=UTC)
    return MirrorRow(
        object_id="PTWICE",
        location_id="L001",
        created_at=datetime(2026, 3, 1, tzinfo=UTC),
        updated_at=updated,
        data={"id": "PTWICE", "amount_money": {"amount": amount, "currency": "USD"}},
    )


async def test_one_object_twice_in_a_batch_keeps_the_newest(
    database: Database, system: Conn
) -> None:
    # Two updates of one payment applied together: one statement cannot update a row twice,
    # and the applier retried that batch for ever.
    owner, config = await _owner_and_config(system)
    batches = [
        [_payment(100, 1), _payment(200, 2)],  # in order
        [_payment(400, 4), _payment(300, 3)],  # an older one after a newer one
    ]
    for rows in batches:
        async with database.as_system() as conn:
            await pos_mirror.upsert_objects(conn, config, owner, "payments", rows)
    data = await system.fetchval("SELECT data FROM pos_objects WHERE object_id = 'PTWICE'")
    assert '"amount": 400' in data


def _order(object_id: str, amount: int, updated_minute: int) -> MirrorRow:
    return MirrorRow(
        object_id=object_id,
        location_id="L001",
        created_at=datetime(2026, 3, 1, tzinfo=UTC),
        updated_at=datetime(2026, 3, 1, 12, updated_minute, tzinfo=UTC),
        data={"id": object_id, "total_money": {"amount": amount, "currency": "USD"}},
    )


async def test_a_first_pulls_page_meeting_a_mirrored_object_writes_nothing_then_upserts(
    database: Database, system: Conn
) -> None:
    # A resource's first pull inserts its pages without ON CONFLICT; an object a webhook event
    # mirrored meanwhile refuses the whole insert, and the page is upserted instead, in the same
    # transaction: the newer version of each object stays, none is doubled.
    owner, config = await _owner_and_config(system)
    async with database.as_system() as conn:
        await pos_mirror.upsert_objects(
            conn, config, owner, "orders", [_order("OWEBHOOK", 900, 30), _order("OOLD", 1, 1)]
        )
    page = MirrorColumns.of(
        [_order("ONEW", 100, 5), _order("OWEBHOOK", 200, 5), _order("OOLD", 300, 5)]
    )
    async with database.as_system() as conn:
        assert not await pos_mirror.insert_new_objects(conn, config, owner, "orders", page)
        assert await conn.fetchval("SELECT count(*) FROM pos_objects") == 2  # nothing written
        await pos_mirror.upsert_objects(conn, config, owner, "orders", page)
    rows = await system.fetch("SELECT object_id, data::text AS data FROM pos_objects")
    amounts = {r["object_id"]: json.loads(r["data"])["total_money"]["amount"] for r in rows}
    assert amounts == {"ONEW": 100, "OWEBHOOK": 900, "OOLD": 300}

    fresh = MirrorColumns.of([_order("OFRESH1", 1, 6), _order("OFRESH2", 2, 6)])
    async with database.as_system() as conn:
        assert await pos_mirror.insert_new_objects(conn, config, owner, "orders", fresh)
    assert await system.fetchval("SELECT count(*) FROM pos_objects") == 5


async def test_times_are_stored_to_the_microsecond_near_the_epoch_and_far_from_it(
    database: Database, system: Conn
) -> None:
    # Times go to PostgreSQL as seconds since the epoch where a float8 holds every
    # microsecond, else as timestamps: either way each comes back as it was.
    owner, config = await _owner_and_config(system)
    near = [
        datetime(2026, 5, 17, 3, 4, 5, 123456, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2105, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    ]
    far = [
        datetime(2500, 6, 1, 12, 0, 0, 1, tzinfo=UTC),
        datetime(1700, 6, 1, 12, 0, 0, 999999, tzinfo=UTC),
    ]
    for n, times in enumerate((near, near + far)):
        rows = [
            MirrorRow(f"T{n}-{i}", None, moment, moment, {"id": f"T{n}-{i}"})
            for i, moment in enumerate(times)
        ]
        async with database.as_system() as conn:
            await pos_mirror.upsert_objects(conn, config, owner, "payments", rows)
        async with database.as_system() as conn:
            assert await pos_mirror.insert_new_objects(
                conn, config, owner, "refunds", MirrorColumns.of(rows)
            )
    stored = await system.fetch("SELECT object_id, created_at, updated_at FROM pos_objects")
    assert len(stored) == 2 * (2 * len(near) + len(far))
    for row in stored:
        moment = (near + far)[int(row["object_id"].rsplit("-", 1)[1])]
        assert row["created_at"] == row["updated_at"] == moment, row["object_id"]
