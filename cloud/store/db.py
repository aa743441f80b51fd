"""The cloud's PostgreSQL access: one pool per database role, a transaction per unit of work.

Two credentials, two pools (docs/cloud-rls.md):

- `as_user(user_id)` runs on the farm_app role. The transaction first sets app.user_id, and
  row-level security in PostgreSQL decides every row from there.
- `as_system()` runs on the farm_sync role, for the few code paths that act for no user (sync
  apply, login before the user is known, the identity delta). Keep its callers few and obvious.

Both roles are checked at connect time: neither may be a superuser, bypass RLS, own a table or
act as farm_authz, and the user role may not act as the system role.

A database that cannot be reached, or that drops the connection (a restart, a failover), is a
:class:`DatabaseUnavailable`: 503 SERVICE_UNAVAILABLE in the envelope, never a 500; so is a
transaction PostgreSQL aborted to break a deadlock with another one (:class:`TransientConflict`).
The pools reconnect on their own: a connection found closed is replaced at the next acquire, so
requests after the database is back succeed without restarting the process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from protocol.errors import ServiceUnavailable

__all__ = ["Database", "DatabaseUnavailable", "TransientConflict", "UnsafeRoleError"]

logger = logging.getLogger(__name__)

# Roles created by migration 0001_roles.sql.
SYSTEM_ROLE = "farm_sync"
AUTHZ_ROLE = "farm_authz"

# Strings: asyncpg's classes are generic only in its type stubs.
Connection: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"
Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"


class UnsafeRoleError(RuntimeError):
    """A pool's database role could escape row-level security."""


class DatabaseUnavailable(ServiceUnavailable):
    """PostgreSQL could not be reached or dropped the connection; the request may be retried."""

    default_message = "The database is unavailable; try again shortly"


class TransientConflict(ServiceUnavailable):
    """PostgreSQL ended the transaction to break a deadlock or a serialization conflict with a
    concurrent one: nothing of it was applied, and the same request may simply be retried."""

    default_message = "A concurrent change got in the way; nothing was changed, try again"


# What PostgreSQL raises when it aborts a transaction only because of another one (SQLSTATE
# 40P01, 40001).
_CONCURRENCY_ABORT: tuple[type[BaseException], ...] = (
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
)
# What only a lost or refused database connection raises, at any point of a transaction.
_CONNECTION_LOST: tuple[type[BaseException], ...] = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.PostgresConnectionError,  # SQLSTATE class 08
    asyncpg.CannotConnectNowError,  # the server is starting or shutting down
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
)
# Raised by the transaction's own body for other reasons too (a mail server refusing, a query's
# time limit, a constraint): counted as the database's only while a connection is being opened
# (refused, timed out, the login or the database refused).
_CONNECT_FAILED: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # A pooled connection the server ended while idle can fail its BEGIN this way.
    asyncpg.InternalClientError,
)


if TYPE_CHECKING:
    _BaseConnection = asyncpg.Connection[asyncpg.Record]
else:
    _BaseConnection = asyncpg.Connection


class _PooledConnection(_BaseConnection):
    """A pooled connection handed back without asyncpg's reset query.

    Every use of a pooled connection is a transaction whose settings are local to it
    (``set_config(..., true)``, transaction-scoped advisory locks), and an open transaction is
    still rolled back on release; the listener and the migrator use connections of their own.
    The reset query (``RESET ALL``, ``UNLISTEN *``...) would only cost a round trip per use.
    """

    def get_reset_query(self) -> str:
        """No session state to reset (see the class)."""
        return ""


async def _init_connection(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Decode json and jsonb to Python values on every new connection."""
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )


async def _check_role(pool: Pool, *, forbidden: tuple[str, ...], io_timeout: float) -> str:
    """Refuse a role that is a superuser, has BYPASSRLS, owns tables, or can act as one of the
    `forbidden` roles (being a member, it would inherit their policies or SET ROLE to them)."""
    async with pool.acquire(timeout=io_timeout) as conn:
        row = await conn.fetchrow(
            """
            SELECT r.rolname, r.rolsuper, r.rolbypassrls,
                   (SELECT count(*) FROM pg_catalog.pg_class AS c
                    WHERE c.relowner = r.oid AND c.relkind IN ('r', 'p')) AS owned_tables,
                   ARRAY(SELECT f.rolname FROM pg_catalog.pg_roles AS f
                         WHERE f.rolname = ANY($1::text[]) AND pg_has_role(r.oid, f.oid, 'MEMBER')
                         ORDER BY f.rolname) AS acts_as
            FROM pg_catalog.pg_roles AS r
            WHERE r.rolname = current_user
            """,
            list(forbidden),
            timeout=io_timeout,
        )
    assert row is not None  # current_user always has a pg_roles row
    name: str = row["rolname"]
    problems = []
    if row["rolsuper"]:
        problems.append("is a superuser")
    if row["rolbypassrls"]:
        problems.append("has BYPASSRLS")
    if row["owned_tables"]:
        problems.append(f"owns {row['owned_tables']} tables")
    if row["acts_as"]:
        problems.append(f"can act as {', '.join(row['acts_as'])}")
    if problems:
        raise UnsafeRoleError(
            f"database role {name!r} {', '.join(problems)}; row-level security would not hold"
        )
    return name


class Database:
    """Pools for the user path and the system path; every call is bounded by `io_timeout`."""

    def __init__(self, user_pool: Pool, system_pool: Pool, *, io_timeout: float) -> None:
        self._user_pool = user_pool
        self._system_pool = system_pool
        self._timeout = io_timeout

    @classmethod
    async def connect(
        cls,
        user_dsn: str,
        system_dsn: str,
        *,
        io_timeout: float = 10.0,
        min_size: int = 1,
        max_size: int = 10,
    ) -> Database:
        """Open both pools and check their roles; close them again if a check fails."""
        pools: list[Pool] = []
        try:
            for dsn in (user_dsn, system_dsn):
                pool = await asyncpg.create_pool(
                    dsn,
                    min_size=min_size,
                    max_size=max_size,
                    timeout=io_timeout,
                    # The default timeout of every query, BEGIN and COMMIT on these connections.
                    command_timeout=io_timeout,
                    init=_init_connection,
                    connection_class=_PooledConnection,
                )
                pools.append(pool)
            user_pool, system_pool = pools
            user_role = await _check_role(
                user_pool, forbidden=(SYSTEM_ROLE, AUTHZ_ROLE), io_timeout=io_timeout
            )
            system_role = await _check_role(
                system_pool, forbidden=(AUTHZ_ROLE,), io_timeout=io_timeout
            )
        except BaseException:
            for pool in pools:
                await _close_pool(pool, io_timeout)
            raise
        logger.info("database connected: user role %s, system role %s", user_role, system_role)
        return cls(user_pool, system_pool, io_timeout=io_timeout)

    @asynccontextmanager
    async def _transaction(self, pool: Pool, **options: Any) -> AsyncIterator[Connection]:
        """A pooled connection in a transaction; a lost database is :class:`DatabaseUnavailable`."""
        async with self._connection(pool, options) as conn:
            yield conn

    @asynccontextmanager
    async def _connection(
        self, pool: Pool, transaction: dict[str, Any] | None
    ) -> AsyncIterator[Connection]:
        """A pooled connection, in a transaction unless ``transaction`` is None; a lost
        database is :class:`DatabaseUnavailable`."""
        opened = False
        try:
            async with pool.acquire(timeout=self._timeout) as conn:
                if transaction is None:
                    opened = True
                    yield conn
                else:
                    async with conn.transaction(**transaction):
                        opened = True
                        yield conn
        except _CONNECTION_LOST as err:
            raise DatabaseUnavailable() from err
        except _CONCURRENCY_ABORT as err:
            logger.warning("transaction aborted by a concurrent one, not applied: %s", err)
            raise TransientConflict() from err
        except _CONNECT_FAILED as err:
            if opened:
                raise
            raise DatabaseUnavailable() from err

    @asynccontextmanager
    async def as_user(self, user_id: UUID) -> AsyncIterator[Connection]:
        """A transaction acting for `user_id`: row-level security applies to everything in it."""
        async with self._transaction(self._user_pool) as conn:
            # is_local=true: the setting ends with the transaction, so a pooled connection
            # never carries one user's identity into the next use.
            await conn.execute(
                "SELECT set_config('app.user_id', $1, true)", str(user_id), timeout=self._timeout
            )
            yield conn

    @asynccontextmanager
    async def statements_for_user(self) -> AsyncIterator[Connection]:
        """A user-path connection outside a transaction, acting for nobody until a statement
        names its user itself: for a function that calls ``set_config('app.user_id', ...,
        true)`` first, so one round trip does the work of ``as_user``'s three or more (the
        setting ends with the statement's own transaction). Row-level security applies as on
        ``as_user``; a statement that names no user sees no farm's rows."""
        async with self._connection(self._user_pool, None) as conn:
            yield conn

    @asynccontextmanager
    async def as_system(self) -> AsyncIterator[Connection]:
        """A transaction on the system role, for sync apply and pre-authentication lookups."""
        async with self._transaction(self._system_pool) as conn:
            yield conn

    @asynccontextmanager
    async def statements_as_system(self) -> AsyncIterator[Connection]:
        """A connection on the system role outside a transaction: each statement commits on its
        own, in one round trip (for a hot path whose writes are single statements)."""
        async with self._connection(self._system_pool, None) as conn:
            yield conn

    @asynccontextmanager
    async def snapshot_as_system(self) -> AsyncIterator[Connection]:
        """A read-only transaction on the system role that sees one snapshot throughout
        (REPEATABLE READ): what several queries read belongs to one moment."""
        async with self._transaction(
            self._system_pool, isolation="repeatable_read", readonly=True
        ) as conn:
            yield conn

    async def ping(self) -> dict[str, float | None]:
        """Round trip of ``SELECT 1`` in ms on each pool (``user``, ``system``); ``None`` for a
        pool that failed. Runs outside any transaction and acts for nobody."""
        times: dict[str, float | None] = {}
        for name, pool in (("user", self._user_pool), ("system", self._system_pool)):
            started = time.perf_counter()
            try:
                async with pool.acquire(timeout=self._timeout) as conn:
                    await conn.fetchval("SELECT 1", timeout=self._timeout)
            except Exception:  # a health probe reports any failure; asyncpg raises a broad
                # set, including InternalClientError on a connection killed mid-operation.
                logger.warning("database ping failed on the %s pool", name, exc_info=True)
                times[name] = None
            else:
                times[name] = (time.perf_counter() - started) * 1000
        return times

    async def close(self) -> None:
        """Close both pools, waiting at most `io_timeout` for connections in use."""
        for pool in (self._user_pool, self._system_pool):
            await _close_pool(pool, self._timeout)


async def _close_pool(pool: Pool, io_timeout: float) -> None:
    """Close a pool gracefully, or terminate its connections after `io_timeout`."""
    try:
        await asyncio.wait_for(pool.close(), io_timeout)
    except TimeoutError:
        logger.warning("database pool did not close in %.1f s; terminating it", io_timeout)
        pool.terminate()
