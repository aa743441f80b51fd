"""The cloud's test database as docs/cloud-rls.md tells an operator to set it up: the roles,
a migrated template database, and one database's DSNs. The cloud tests' fixtures and the
benchmarks build on it."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from cloud.store.migrations import migrate
from tests.support.postgres import PostgresCluster

__all__ = [
    "APP_PASSWORD",
    "APP_ROLE",
    "OWNER_PASSWORD",
    "OWNER_ROLE",
    "SYSTEM_PASSWORD",
    "SYSTEM_ROLE",
    "TEMPLATE",
    "CloudDatabase",
    "build_template",
]

OWNER_ROLE = "farm_owner"
OWNER_PASSWORD = "test-owner-password"
APP_ROLE = "farm_app"
SYSTEM_ROLE = "farm_sync"
APP_PASSWORD = "test-app-password"
SYSTEM_PASSWORD = "test-sync-password"
TEMPLATE = "farm_template"


@dataclass(frozen=True)
class CloudDatabase:
    """One test's database and the DSNs of the three roles that use it."""

    name: str
    superuser_dsn: str
    owner_dsn: str
    app_dsn: str
    system_dsn: str
    cluster: PostgresCluster

    def dsn_as(self, user: str, password: str) -> str:
        """The DSN of this database for another login role."""
        return self.cluster.dsn(self.name, user, password)


async def build_template(cluster: PostgresCluster) -> None:
    """Set the database up as docs/cloud-rls.md tells an operator to, then migrate it."""
    conn = await asyncpg.connect(cluster.dsn(), timeout=30)
    try:
        # The schema owner is an ordinary role, as in production: not a superuser, so the
        # tests see what FORCE ROW LEVEL SECURITY and the helpers' ownership really do.
        await conn.execute(
            f"CREATE ROLE {OWNER_ROLE} LOGIN CREATEROLE PASSWORD '{OWNER_PASSWORD}'", timeout=30
        )
        await conn.execute(f'CREATE DATABASE "{TEMPLATE}" OWNER {OWNER_ROLE}', timeout=60)
    finally:
        await conn.close(timeout=10)
    await migrate(cluster.dsn(TEMPLATE, OWNER_ROLE, OWNER_PASSWORD))
    conn = await asyncpg.connect(cluster.dsn(TEMPLATE), timeout=30)
    try:
        for role, password in ((APP_ROLE, APP_PASSWORD), (SYSTEM_ROLE, SYSTEM_PASSWORD)):
            await conn.execute(f"ALTER ROLE {role} LOGIN PASSWORD '{password}'", timeout=30)
    finally:
        await conn.close(timeout=10)
