"""Sync jobs across real `farm-cloud run` processes on one database: a job interrupted by
killing its process (kill -9) is taken over when its lease runs out and finishes exactly once;
two processes never run the same job twice; a process under webhook load with a job running
stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from cloud.pos_provider.fake import send_event, webhook_event
from tests.cloud.api.conftest import PASSWORD, Conn
from tests.cloud.cloud_process import CloudProcess, Start, cloud_processes
from tests.cloud.conftest import CloudDatabase
from tests.cloud.pos.conftest import FakeProvider, config_body, wait_for
from tests.cloud.seed import add_user

CUSTOMERS = "/v2/customers"


@pytest.fixture
async def start_cloud(
    cloud_db: CloudDatabase, fake: FakeProvider, tmp_path: Path
) -> AsyncIterator[Start]:
    async with cloud_processes(
        cloud_db,
        tmp_path,
        pos_sandbox_url=fake.url,
        pos_sync_interval_s="0",
        pos_poll_interval_s="0.05",
        pos_job_lease_s="2",
    ) as start:
        yield start


async def login(cloud: CloudProcess, system: Conn, password_hash: str) -> str:
    await add_user(system, "alice@example.com", "farm_manager")
    await system.execute("UPDATE users SET password_hash = $1", password_hash)
    answer = await cloud.call(
        "POST", "/api/v1/login", body={"email": "alice@example.com", "password": PASSWORD}
    )
    token: str = answer["access_token"]
    return token


async def jobs(cloud_db: CloudDatabase) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        return list(await conn.fetch("SELECT * FROM pos_jobs ORDER BY created_at"))
    finally:
        await conn.close(timeout=10)


async def mirrored_customers(cloud_db: CloudDatabase) -> int:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pos_objects WHERE resource = 'customers'"
        )
        return count
    finally:
        await conn.close(timeout=10)


async def test_a_job_of_a_killed_process_resumes_and_finishes_exactly_once(
    start_cloud: Start,
    fake: FakeProvider,
    cloud_db: CloudDatabase,
    system: Conn,
    password_hash: str,
) -> None:
    fake.merchant.add_customers(1995)  # 2,000 customers: 20 pages of 100
    fake.merchant.delay_s = 0.1
    first = await start_cloud()
    token = await login(first, system, password_hash)
    config = await first.call("POST", "/api/v1/pos/configs", token, config_body(fake))
    await first.call("POST", f"/api/v1/pos/sync/customers/{config['id']}", token)

    async def some_pages() -> bool:
        return (await jobs(cloud_db))[0]["pages"] >= 3

    await wait_for(some_pages, "the first pages")
    await first.stop(kill=True)
    [job] = await jobs(cloud_db)
    assert job["state"] == "running" and job["pages"] < 20  # interrupted mid-way

    await start_cloud()

    async def finished() -> bool:
        return (await jobs(cloud_db))[0]["state"] != "running"

    await wait_for(finished, "the job taken over", limit_s=180)
    [job] = await jobs(cloud_db)
    assert job["state"] == "succeeded", job["error"]
    assert job["attempts"] == 2
    assert (job["pages"], job["records"]) == (20, 2000)  # every page applied once
    assert await mirrored_customers(cloud_db) == 2000


async def test_two_processes_never_run_the_same_job_twice(
    start_cloud: Start,
    fake: FakeProvider,
    cloud_db: CloudDatabase,
    system: Conn,
    password_hash: str,
) -> None:
    fake.merchant.add_customers(495)  # 500 customers: 5 pages a job
    fake.merchant.delay_s = 0.02
    first = await start_cloud()
    second = await start_cloud()
    token = await login(first, system, password_hash)
    configs = []
    for n in range(6):
        cloud = (first, second)[n % 2]
        configs.append(await cloud.call("POST", "/api/v1/pos/configs", token, config_body(fake)))
    for n, config in enumerate(configs):
        cloud = (first, second)[n % 2]
        await cloud.call("POST", f"/api/v1/pos/sync/customers/{config['id']}", token)

    async def all_done() -> bool:
        return all(j["state"] == "succeeded" for j in await jobs(cloud_db))

    await wait_for(all_done, "six jobs", limit_s=180)
    done = await jobs(cloud_db)
    assert len(done) == 6
    assert [j["attempts"] for j in done] == [1] * 6
    assert [j["records"] for j in done] == [500] * 6
    # Each page of each job was asked of the provider exactly once.
    assert sum(1 for _, path in fake.merchant.requests if path == CUSTOMERS) == 6 * 5


class WebhookLoad:
    """Senders posting signed events without pause on ``connections`` connections until told
    to stop; keeps the ids of the events the cloud acknowledged."""

    def __init__(self, cloud: CloudProcess, config: dict[str, Any], connections: int = 20) -> None:
        self.url = f"{cloud.url}/api/v1/pos/webhook?config_id={config['id']}"
        self.notification_url = config["notification_url"]
        self.key = config["webhook_signature_key"]
        self.connections = connections
        self.acknowledged: set[str] = set()
        self.refused: list[int] = []
        self._stopping = False

    async def run(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.connections)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await asyncio.gather(*(self._send(session) for _ in range(self.connections)))

    def stop(self) -> None:
        self._stopping = True

    async def _send(self, session: aiohttp.ClientSession) -> None:
        while not self._stopping:
            payment = {
                "id": f"P{uuid.uuid4().hex[:12]}",
                "location_id": "L001",
                "status": "COMPLETED",
                "created_at": "2026-03-01T00:00:00.000Z",
                "updated_at": "2026-03-01T00:00:00.000Z",
            }
            event = webhook_event("MLFAKE0001", "payment.updated", payment)
            try:
                status = await send_event(
                    self.url, self.notification_url, self.key, event, session=session
                )
            except (aiohttp.ClientError, TimeoutError):
                return  # the server is going away
            if status < 300:
                self.acknowledged.add(event["event_id"])
            elif status != 503:  # a server draining its requests may answer 503
                self.refused.append(status)


async def stored_events(cloud_db: CloudDatabase) -> set[str]:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        return {r["event_id"] for r in await conn.fetch("SELECT event_id FROM pos_webhook_events")}
    finally:
        await conn.close(timeout=10)


async def test_sigterm_under_webhook_load_with_a_sync_running_exits_cleanly(
    start_cloud: Start,
    fake: FakeProvider,
    cloud_db: CloudDatabase,
    system: Conn,
    password_hash: str,
) -> None:
    fake.merchant.add_customers(1995)  # 20 pages of 100
    fake.merchant.delay_s = 0.1
    cloud = await start_cloud()
    token = await login(cloud, system, password_hash)
    body = config_body(fake)
    config = await cloud.call("POST", "/api/v1/pos/configs", token, body)
    await cloud.call("POST", f"/api/v1/pos/sync/customers/{config['id']}", token)

    async def some_pages() -> bool:
        return (await jobs(cloud_db))[0]["pages"] >= 2

    await wait_for(some_pages, "the first pages of the sync")
    fake.merchant.delay_s = 5.0  # the job waits on the provider when the signal comes
    load = WebhookLoad(cloud, {**body, "id": config["id"]})
    sending = asyncio.create_task(load.run())

    async def loaded() -> bool:
        return len(load.acknowledged) >= 300

    await wait_for(loaded, "the webhook load")
    cloud.process.send_signal(signal.SIGTERM)
    try:
        # A hang check, not a speed measurement: a clean stop takes about a second, plus the
        # web server's 10 s grace when a request is still in flight.
        code = await asyncio.wait_for(cloud.process.wait(), 30)
    finally:
        load.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sending, 30)
    assert code == 0
    assert load.refused == []
    [job] = await jobs(cloud_db)
    assert job["state"] == "running" and job["pages"] < 20  # left mid-way, to resume
    assert load.acknowledged <= await stored_events(cloud_db)  # nothing acknowledged is lost
