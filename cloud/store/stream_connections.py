"""Open stream connections of every process (0060_stream_connections.sql), system path."""

from __future__ import annotations

from uuid import UUID

from cloud.store.db import Connection

__all__ = ["any_open", "forget", "forget_worker", "open_if_under", "refresh_worker", "sweep"]


async def open_if_under(
    conn: Connection, connection_id: UUID, user_id: UUID, worker: str, maximum: int, ttl_s: float
) -> bool:
    """Count a new connection of ``user_id`` if it has fewer than ``maximum`` live ones, in any
    process; ``False`` (nothing counted) otherwise. Two processes admitting the same user at once
    queue on a lock of that user, so the limit is never passed."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('stream:' || $1, 0))", str(user_id)
    )
    live: int = await conn.fetchval(
        "SELECT count(*) FROM stream_connections"
        " WHERE user_id = $1 AND seen_at > now() - make_interval(secs => $2)",
        user_id,
        ttl_s,
    )
    if live >= maximum:
        return False
    await conn.execute(
        "INSERT INTO stream_connections (id, user_id, worker) VALUES ($1, $2, $3)",
        connection_id,
        user_id,
        worker,
    )
    return True


async def any_open(conn: Connection) -> bool:
    """Whether any process counts an open stream connection (a row of a process that died
    unannounced counts until it is swept)."""
    return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM stream_connections)"))


async def forget(conn: Connection, connection_id: UUID) -> None:
    """A connection ended."""
    await conn.execute("DELETE FROM stream_connections WHERE id = $1", connection_id)


async def refresh_worker(conn: Connection, worker: str) -> None:
    """This process is alive: its connections still count."""
    await conn.execute("UPDATE stream_connections SET seen_at = now() WHERE worker = $1", worker)


async def sweep(conn: Connection, ttl_s: float) -> int:
    """Forget connections of processes silent for ``ttl_s``; how many went."""
    status: str = await conn.execute(
        "DELETE FROM stream_connections WHERE seen_at < now() - make_interval(secs => $1)", ttl_s
    )
    return int(status.split()[-1])


async def forget_worker(conn: Connection, worker: str) -> None:
    """This process is stopping: none of its connections count any more."""
    await conn.execute("DELETE FROM stream_connections WHERE worker = $1", worker)
