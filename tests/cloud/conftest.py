"""Fixtures for the cloud tests: one private PostgreSQL cluster per session, a fresh database per
test copied from a migrated template.

- `postgres_cluster`: the running cluster (superuser DSN: `postgres_cluster.dsn()`).
- `cloud_template`: name of the template database, owned and migrated by the non-superuser role
  farm_owner; farm_app and farm_sync are given LOGIN and the test passwords below, as an
  operator would (docs/cloud-rls.md).
- `cloud_db`: a fresh migrated database for one test, with DSNs for the superuser, the owner, the
  user path role and the system path role.
- `empty_db`: a fresh database with no migrations, for the migration runner's tests.
- `database`: a connected `cloud.store.db.Database` on `cloud_db`.
- `system` and `app`: one connection to `cloud_db` as the system path (farm_sync, as the sync
  writes) and as the user path (farm_app); `connected(dsn)` for any other role.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg
import pytest

from cloud.store.db import Database
from tests.support.cloud_database import (
    APP_PASSWORD,
    APP_ROLE,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    SYSTEM_ROLE,
    TEMPLATE,
    CloudDatabase,
    build_template,
)
from tests.support.postgres import PostgresCluster, PostgresUnavailable

Conn: TypeAlias = "asyncpg.Connection[Any]"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A private PostgreSQL cluster for the whole session."""
    try:
        cluster = PostgresCluster.start()
    except PostgresUnavailable as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cloud_template(postgres_cluster: PostgresCluster) -> str:
    """Migrate a template database once per session; return its name."""
    # Session fixtures are synchronous here; asyncio.run in a worker thread keeps this loop
    # apart from the ones pytest-asyncio gives each test.
    with ThreadPoolExecutor(max_workers=1) as executor:
        executor.submit(asyncio.run, build_template(postgres_cluster)).result(timeout=120)
    return TEMPLATE


async def _create_database(cluster: PostgresCluster, template: str) -> str:
    name = f"test_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(cluster.dsn(), timeout=30)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"', timeout=60)
        if template == TEMPLATE:
            # Owned by the migrating role, as docs/cloud-rls.md sets a database up: the schema
            # owner then keeps its CREATE on the public schema (monthly reading partitions).
            await conn.execute(f'ALTER DATABASE "{name}" OWNER TO {OWNER_ROLE}', timeout=30)
    finally:
        await conn.close(timeout=10)
    return name


async def _drop_database(cluster: PostgresCluster, name: str) -> None:
    conn = await asyncpg.connect(cluster.dsn(), timeout=30)
    try:
        await conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)', timeout=60)
    finally:
        await conn.close(timeout=10)


@pytest.fixture
async def cloud_db(
    postgres_cluster: PostgresCluster, cloud_template: str
) -> AsyncIterator[CloudDatabase]:
    """A fresh, migrated database for one test."""
    name = await _create_database(postgres_cluster, cloud_template)
    try:
        yield CloudDatabase(
            name=name,
            superuser_dsn=postgres_cluster.dsn(name),
            owner_dsn=postgres_cluster.dsn(name, OWNER_ROLE, OWNER_PASSWORD),
            app_dsn=postgres_cluster.dsn(name, APP_ROLE, APP_PASSWORD),
            system_dsn=postgres_cluster.dsn(name, SYSTEM_ROLE, SYSTEM_PASSWORD),
            cluster=postgres_cluster,
        )
    finally:
        await _drop_database(postgres_cluster, name)


@pytest.fixture
async def empty_db(postgres_cluster: PostgresCluster) -> AsyncIterator[str]:
    """A fresh database with nothing migrated; yields its superuser DSN."""
    name = await _create_database(postgres_cluster, "template1")
    try:
        yield postgres_cluster.dsn(name)
    finally:
        await _drop_database(postgres_cluster, name)


@pytest.fixture
async def database(cloud_db: CloudDatabase) -> AsyncIterator[Database]:
    """The service's database object, connected to `cloud_db`."""
    db = await Database.connect(cloud_db.app_dsn, cloud_db.system_dsn, io_timeout=10.0)
    try:
        yield db
    finally:
        await db.close()


@asynccontextmanager
async def connected(dsn: str) -> AsyncIterator[Conn]:
    """One connection as the DSN's role, closed when the block ends."""
    conn = await asyncpg.connect(dsn, timeout=10, command_timeout=10)
    try:
        yield conn
    finally:
        await conn.close(timeout=10)


@pytest.fixture
async def system(cloud_db: CloudDatabase) -> AsyncIterator[Conn]:
    """A connection on the system role (farm_sync), as the sync writes."""
    async with connected(cloud_db.system_dsn) as conn:
        yield conn


@pytest.fixture
async def app(cloud_db: CloudDatabase) -> AsyncIterator[Conn]:
    """A connection on the user path role (farm_app), as the service reads and writes."""
    async with connected(cloud_db.app_dsn) as conn:
        yield conn
