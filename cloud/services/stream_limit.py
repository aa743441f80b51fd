"""The streams' per-user connection limit counted across every cloud process
(``protocol.live.limit.ConnectionLimit``, rows in ``stream_connections``).

Each process refreshes its rows every ``ttl_s / 3``; a process killed without a goodbye stops
counting after ``ttl_s``. While the database is unavailable the limit is counted in this process
only (the streams' credentials cannot be checked then anyway, so little gets that far).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from uuid import UUID

from cloud.store import stream_connections as store
from cloud.store.db import Database, DatabaseUnavailable
from farmkit.tasks import cancel_and_wait
from protocol.live.limit import LocalConnectionLimit

__all__ = ["SharedConnectionLimit"]

log = logging.getLogger(__name__)


class SharedConnectionLimit:
    """At most ``maximum`` open stream connections per user over all processes."""

    def __init__(self, db: Database, maximum: int, ttl_s: float = 30.0) -> None:
        self.worker = uuid.uuid4().hex
        self._db = db
        self._maximum = maximum
        self._ttl_s = ttl_s
        self._local = LocalConnectionLimit(maximum)
        self._ids: defaultdict[str, list[UUID | None]] = defaultdict(list)
        self._task: asyncio.Task[None] | None = None

    async def acquire(self, user_id: str) -> bool:
        """Count one more connection of ``user_id`` if all processes hold fewer than the limit."""
        connection_id: UUID | None = uuid.uuid4()
        assert connection_id is not None
        try:
            async with self._db.as_system() as conn:
                admitted = await store.open_if_under(
                    conn, connection_id, UUID(user_id), self.worker, self._maximum, self._ttl_s
                )
        except DatabaseUnavailable:
            log.warning("stream limit counted in this process only: the database is unavailable")
            admitted, connection_id = True, None
        if not admitted:
            return False
        if not await self._local.acquire(user_id):  # this process alone already holds the limit
            await self._forget(connection_id)
            return False
        self._ids[user_id].append(connection_id)
        return True

    async def release(self, user_id: str) -> None:
        """Count one connection of ``user_id`` fewer."""
        await self._local.release(user_id)
        ids = self._ids[user_id]
        connection_id = ids.pop() if ids else None
        if not ids:
            del self._ids[user_id]
        await self._forget(connection_id)

    async def _forget(self, connection_id: UUID | None) -> None:
        if connection_id is None:
            return
        try:
            async with self._db.as_system() as conn:
                await store.forget(conn, connection_id)
        except DatabaseUnavailable:
            pass  # it stops counting when this process stops or is swept

    def total(self) -> int:
        """Open connections counted by this process, all users together."""
        return self._local.total()

    def of(self, user_id: str) -> int:
        """Open connections of ``user_id`` counted by this process."""
        return self._local.of(user_id)

    def start(self) -> None:
        """Keep this process's connections counted (and sweep dead processes') in the background."""
        self._task = asyncio.create_task(self._keep_alive(), name="stream-limit")

    async def stop(self) -> None:
        """Stop, and stop counting this process's connections everywhere."""
        await cancel_and_wait(self._task)
        self._task = None
        try:
            async with self._db.as_system() as conn:
                await store.forget_worker(conn, self.worker)
        except DatabaseUnavailable:
            log.warning(
                "stream connections of this process are left to expire (%.0f s)", self._ttl_s
            )

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self._ttl_s / 3)
            try:
                async with self._db.as_system() as conn:
                    await store.refresh_worker(conn, self.worker)
                    await store.sweep(conn, self._ttl_s)
            except DatabaseUnavailable:
                log.warning("stream connections not refreshed: the database is unavailable")
