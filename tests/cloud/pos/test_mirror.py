"""The mirror's upsert: pages and batches of events may carry one object more than once."""

from __future__ import annotations

from datetime import UTC, datetime

from cloud.store import pos_mirror
from cloud.store.db import Database
from cloud.store.pos_mirror import MirrorRow
from tests.cloud.api.conftest import Conn
from tests.cloud.seed import add_user


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
    owner = await add_user(system, "owner@example.com", "farm_manager")
    config = await system.fetchval(
        "INSERT INTO pos_configs (owner_id, name, environment, access_token)"
        " VALUES ($1, 'Shop', 'sandbox', '\\x00') RETURNING id",
        owner,
    )
    batches = [
        [_payment(100, 1), _payment(200, 2)],  # in order
        [_payment(400, 4), _payment(300, 3)],  # an older one after a newer one
    ]
    for rows in batches:
        async with database.as_system() as conn:
            await pos_mirror.upsert_objects(conn, config, owner, "payments", rows)
    data = await system.fetchval("SELECT data FROM pos_objects WHERE object_id = 'PTWICE'")
    assert '"amount": 400' in data
