"""Three ``farm-cloud`` processes on one private PostgreSQL, driven round-robin as a load balancer
would (issue 14, docs/scaling.md): what one process counts, revokes or applies holds on the
others; a PostgreSQL restart is survived by all of them (503 in the envelope meanwhile); a
process killed while applying a batch loses and doubles nothing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.tokens import private_key_pem
from tests.e2e.processes import free_port, wait_until_serving
from tests.support.cloud_database import (
    APP_PASSWORD,
    APP_ROLE,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    SYSTEM_ROLE,
    TEMPLATE,
    build_template,
)
from tests.support.postgres import PostgresCluster, PostgresUnavailable
from tests.support.sim_agent import SimAgent

ADMIN = "root@fleet.test"
ADMIN_PASSWORD = "fleet admin password 123"
DATABASE = "fleet"
PROCESSES = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """A private cluster of this module's own: the restart test stops and starts it."""
    try:
        cluster = PostgresCluster.start()
    except PostgresUnavailable as err:
        pytest.fail(str(err), pytrace=False)
    try:
        with ThreadPoolExecutor(max_workers=1) as executor:
            executor.submit(asyncio.run, build_template(cluster)).result(timeout=120)
        yield cluster
    finally:
        cluster.stop()


@dataclass
class Fleet:
    """N cloud processes on one database, and a client that takes them in turn."""

    cluster: PostgresCluster
    database: str
    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes] | None] = field(default_factory=list)
    _turn: Iterator[int] = field(default_factory=lambda: itertools.cycle(range(PROCESSES)))

    def url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.ports[n]}"

    def next_url(self) -> str:
        """The next process in round-robin order, as a balancer picks."""
        return self.url(next(self._turn))

    def log(self, n: int) -> Path:
        return self.logs / f"cloud-{n}.log"

    def _spawn(self, n: int) -> subprocess.Popen[bytes]:
        env = {**self.env, "CLOUD_PORT": str(self.ports[n])}
        with self.log(n).open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "cloud", "run"], env=env, stdout=out, stderr=out
            )

    async def start(self) -> None:
        """Start every process at once (they race for migrations, the first admin, jobs)."""
        self.ports = [free_port() for _ in range(PROCESSES)]
        self.processes = [self._spawn(n) for n in range(PROCESSES)]
        for n, process in enumerate(self.processes):
            assert process is not None
            await wait_until_serving(self.url(n), process, self.log(n))

    def kill(self, n: int) -> None:
        """SIGKILL process ``n``: no shutdown, no rollback of its own."""
        process = self.processes[n]
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        self.processes[n] = None

    async def restart(self, n: int) -> None:
        process = self._spawn(n)
        self.processes[n] = process
        await wait_until_serving(self.url(n), process, self.log(n))

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            if process is None:
                continue
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)

    async def sql(self, query: str, *args: Any) -> Any:
        conn = await asyncpg.connect(self.cluster.dsn(self.database), timeout=10)
        try:
            return await conn.fetchval(query, *args, timeout=30)
        finally:
            await conn.close(timeout=10)


async def _new_database(cluster: PostgresCluster, name: str) -> None:
    conn = await asyncpg.connect(cluster.dsn(), timeout=30)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', timeout=60)
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"', timeout=60)
        await conn.execute(f'ALTER DATABASE "{name}" OWNER TO {OWNER_ROLE}', timeout=30)
    finally:
        await conn.close(timeout=10)


@pytest.fixture
async def fleet(cluster: PostgresCluster, tmp_path: Path) -> AsyncIterator[Fleet]:
    await _new_database(cluster, DATABASE)
    fleet = Fleet(cluster, DATABASE, tmp_path)
    fleet.env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CLOUD_")},
        "CLOUD_OWNER_DSN": cluster.dsn(DATABASE, OWNER_ROLE, OWNER_PASSWORD),
        "CLOUD_APP_DSN": cluster.dsn(DATABASE, APP_ROLE, APP_PASSWORD),
        "CLOUD_SYNC_DSN": cluster.dsn(DATABASE, SYSTEM_ROLE, SYSTEM_PASSWORD),
        # Every process signs and verifies with the same key (docs/scaling.md).
        "CLOUD_SIGNING_KEY": private_key_pem(Ed25519PrivateKey.generate()).decode(),
        "CLOUD_ADMIN_EMAIL": ADMIN,
        "CLOUD_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "CLOUD_HOST": "127.0.0.1",
        "CLOUD_DB_POOL_MAX": "4",
        "CLOUD_DB_IO_TIMEOUT_S": "5",
        "CLOUD_LOGIN_FAILURES_PER_ADDRESS": "6",
        "CLOUD_POS_JOB_WORKERS": "0",
    }
    await fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


async def _call(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    token: str | None = None,
    **kwargs: Any,
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.request(method, url, headers=headers, **kwargs) as resp:
        return resp.status, (await resp.json()) if resp.status != 204 else None


async def _login(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    status, body = await _call(
        session, "POST", url + "/api/v1/login", json={"email": ADMIN, "password": ADMIN_PASSWORD}
    )
    assert status == 200, body
    return dict(body)


async def test_failed_logins_are_throttled_across_every_process(fleet: Fleet) -> None:
    async with aiohttp.ClientSession() as session:
        wrong = {"email": ADMIN, "password": "not it"}
        statuses = [
            (await _call(session, "POST", fleet.next_url() + "/api/v1/login", json=wrong))[0]
            for _ in range(6)
        ]
        assert statuses == [400] * 6  # two guesses on each of three processes
        for n in range(PROCESSES):  # and now no process lets a seventh through
            status, body = await _call(session, "POST", fleet.url(n) + "/api/v1/login", json=wrong)
            assert status == 429 and body["error"]["code"] == "RATE_LIMITED"


async def test_a_logout_on_one_process_ends_the_session_on_every_process(fleet: Fleet) -> None:
    async with aiohttp.ClientSession() as session:
        token = (await _login(session, fleet.url(0)))["access_token"]
        for n in range(PROCESSES):
            assert (await _call(session, "GET", fleet.url(n) + "/api/v1/farms", token=token))[
                0
            ] == 200
        status, _ = await _call(session, "POST", fleet.url(0) + "/auth/logout", token=token)
        assert status == 204
        # The very next request on each other process is refused: no process caches sessions.
        for n in (1, 2):
            status, body = await _call(session, "GET", fleet.url(n) + "/api/v1/farms", token=token)
            assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"


async def test_two_processes_racing_on_one_refresh_token_end_with_one_winner_and_no_session(
    fleet: Fleet,
) -> None:
    async with aiohttp.ClientSession() as session:
        login = await _login(session, fleet.url(0))
        body = {"refresh_token": login["refresh_token"]}
        answers = await asyncio.gather(
            _call(session, "POST", fleet.url(1) + "/auth/refresh", json=body),
            _call(session, "POST", fleet.url(2) + "/auth/refresh", json=body),
        )
        assert sorted(status for status, _ in answers) == [200, 401]
        winner = next(answer for status, answer in answers if status == 200)
        # The loser presented a used token: reuse revokes the whole family, the winner's too.
        for n in range(PROCESSES):
            status, _ = await _call(
                session, "GET", fleet.url(n) + "/api/v1/farms", token=winner["access_token"]
            )
            assert status == 401
        status, _ = await _call(
            session,
            "POST",
            fleet.url(0) + "/auth/refresh",
            json={"refresh_token": winner["refresh_token"]},
        )
        assert status == 401


async def test_a_periodic_job_ran_once_for_three_processes_starting_together(
    fleet: Fleet,
) -> None:
    # Each process checks the jobs before it serves: three starting at once within the job's
    # hour claimed its run once.
    assert await fleet.sql("SELECT runs FROM cloud_jobs WHERE name = 'rate-limit-windows'") == 1


async def _paired_agent(session: aiohttp.ClientSession, fleet: Fleet, devices: int) -> SimAgent:
    login = await _login(session, fleet.next_url())
    status, created = await _call(
        session,
        "POST",
        fleet.next_url() + "/api/v1/agents",
        token=login["access_token"],
        json={"name": "North", "owner_id": login["user"]["id"]},
    )
    assert status == 201, created
    agent = await SimAgent.pair(session, fleet.next_url(), created["pairing_code"])
    status, ack = await agent.post(
        session, fleet.next_url(), agent.sign(agent.farm_records(devices))
    )
    assert status == 200 and ack["rejected"] == 0
    return agent


async def _readings(fleet: Fleet, agent: SimAgent) -> int:
    count: int = await fleet.sql(
        "SELECT count(*) FROM readings WHERE agent_id = $1::uuid", agent.agent_id
    )
    return count


async def test_a_batch_retried_across_processes_is_applied_once(fleet: Fleet) -> None:
    async with aiohttp.ClientSession() as session:
        agent = await _paired_agent(session, fleet, devices=5)
        records = agent.reading_records(1_700_000_000_000, 60, 10_000)
        batch = agent.sign(records, readings=300)
        answers = await asyncio.gather(
            *(agent.post(session, fleet.url(n), batch) for n in range(PROCESSES))
        )
        assert sorted(status for status, _ in answers) == [200, 409, 409]
        # The agent's retry after a lost answer: the same records, signed afresh, elsewhere.
        for n in range(PROCESSES):
            status, ack = await agent.post(session, fleet.url(n), agent.sign(records, 300))
            assert status == 200 and ack["acked_seq"] == records[-1].seq
        assert await _readings(fleet, agent) == 300


async def test_a_postgresql_restart_is_survived_by_every_process(fleet: Fleet) -> None:
    async with aiohttp.ClientSession() as session:
        token = (await _login(session, fleet.url(0)))["access_token"]
        fleet.cluster.halt()
        try:
            for n in range(PROCESSES):
                status, body = await _call(
                    session, "GET", fleet.url(n) + "/api/v1/farms", token=token
                )
                assert status == 503, body
                assert body["success"] is False
                assert body["error"]["code"] == "SERVICE_UNAVAILABLE"
                # Liveness still answers: the balancer keeps the process while it reconnects.
                assert (await _call(session, "GET", fleet.url(n) + "/health"))[0] == 200
        finally:
            fleet.cluster.resume()
        for n in range(PROCESSES):
            status = 503
            for _ in range(100):  # pools replace their dead connections as they are used
                status, _ = await _call(session, "GET", fleet.url(n) + "/api/v1/farms", token=token)
                if status == 200:
                    break
                assert status == 503
                await asyncio.sleep(0.1)
            assert status == 200
        for process in fleet.processes:
            assert process is not None and process.poll() is None


async def test_a_process_killed_mid_apply_loses_and_doubles_nothing(fleet: Fleet) -> None:
    async with aiohttp.ClientSession() as session:
        agent = await _paired_agent(session, fleet, devices=200)
        records = agent.reading_records(1_700_000_000_000, 150, 10_000)
        batch = agent.sign(records, readings=30_000)
        posting = asyncio.create_task(agent.post(session, fleet.url(0), batch))
        await asyncio.sleep(0.3)  # the 30,000 readings are on their way or being applied
        fleet.kill(0)
        with contextlib.suppress(aiohttp.ClientError):  # the answer died with the process
            await posting
        # Whatever the dead process committed or not, the retry elsewhere completes it.
        status, ack = await agent.post(session, fleet.url(1), agent.sign(records, 30_000))
        assert status == 200 and ack["acked_seq"] == records[-1].seq
        assert await _readings(fleet, agent) == 30_000
        doubled = await fleet.sql(
            "SELECT count(*) FROM (SELECT 1 FROM readings WHERE agent_id = $1::uuid"
            " GROUP BY device_id, metric, ts HAVING count(*) > 1) AS d",
            agent.agent_id,
        )
        assert doubled == 0
        await fleet.restart(0)
