"""Deliveries across real `farm-cloud run` processes on one database: while both run, no
webhook-id is posted twice; when one is killed with SIGKILL mid-run, the other delivers the rest,
and an id comes again only if the receiver had answered it before the kill."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agent.runtime.conftest import eventually
from tests.cloud.api.conftest import PASSWORD
from tests.cloud.cloud_process import Start, cloud_processes
from tests.cloud.conftest import CloudDatabase
from tests.cloud.seed import add_farm_tree, add_user
from tests.cloud.webhooks.conftest import Conn, insert_events
from tests.support.webhook_receiver import WebhookReceiver

EVENTS = 600


@pytest.fixture
async def start_cloud(cloud_db: CloudDatabase, tmp_path: Path) -> AsyncIterator[Start]:
    async with cloud_processes(
        cloud_db,
        tmp_path,
        webhook_allow_private_targets="true",
        webhook_poll_s="0.05",
        webhook_workers="3",
        webhook_batch="20",
        db_pool_max="6",
    ) as start:
        yield start


async def test_two_processes_share_deliveries_and_survive_a_kill_9(
    start_cloud: Start, system: Conn, password_hash: str
) -> None:
    alice = await add_user(system, "alice@example.com", "farm_manager")
    await system.execute("UPDATE users SET password_hash = $1", password_hash)
    farm = await add_farm_tree(system, alice, "Alice's farm")
    first, second = await start_cloud(), await start_cloud()
    token = (
        await first.call(
            "POST", "/api/v1/login", body={"email": "alice@example.com", "password": PASSWORD}
        )
    )["access_token"]
    receiver = WebhookReceiver(delay_s=0.005)
    await receiver.start()
    try:
        webhook = await first.call(
            "POST",
            "/api/v1/webhooks",
            token,
            {"farm_id": str(farm.farm_id), "url": receiver.url, "event_types": ["alert.raised"]},
        )
        receiver.secret = webhook["secret"]

        await insert_events(system, farm.farm_id, EVENTS)
        await receiver.wait_for(EVENTS // 3, timeout=120)
        assert max(receiver.answered_ok.values()) == 1  # both running: never one id twice
        await first.stop(kill=True)
        await asyncio.sleep(0.5)  # requests the receiver had read finish their handlers
        answered_before_kill = set(receiver.answered_ok)

        queued = {str(row["id"]) for row in await system.fetch("SELECT id FROM webhook_deliveries")}
        assert len(queued) == EVENTS
        await receiver.wait_for_ids(queued, timeout=120)
        assert receiver.rejected == 0
        resent = {i for i, n in receiver.answered_ok.items() if n > 1}
        assert resent <= answered_before_kill
        assert len(resent) <= 3 * 20  # at most the killed process's posts in flight

        async def settled() -> bool:
            pending = await system.fetchval(
                "SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'"
            )
            return bool(pending == 0)

        await eventually(settled)
    finally:
        await second.stop()
        await receiver.stop()
