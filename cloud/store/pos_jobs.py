"""Sync jobs in PostgreSQL, shared by every cloud process on the database.

A job is claimed with ``FOR UPDATE SKIP LOCKED`` and held by a lease (``lease_owner``,
``lease_until``) that the worker renews with every page it applies; each page's progress is
written with a fence on the lease, in the page's own transaction, so a worker that lost its lease
(it stalled, another process took the job over) can commit nothing more. A job whose lease ran
out — its process was killed — is claimed again and resumes from its last committed page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "claim_job",
    "enqueue_job",
    "finish_job",
    "list_jobs",
    "owners_due_for_schedule",
    "record_page",
    "release_job",
    "take_page_turn",
    "wait_page_turn",
]

_COLUMNS = (
    "id, config_id, owner_id, kind, trigger, state, steps, step, position, since,"
    " step_high_water, pages, records, progress, error, attempts, run_after, lease_owner,"
    " lease_until, created_at, started_at, finished_at, updated_at"
)


async def enqueue_job(
    conn: Connection,
    config_id: UUID,
    owner_id: UUID,
    kind: str,
    steps: list[str],
    trigger: str,
) -> tuple[asyncpg.Record, bool]:
    """Queue a job; when one of this kind is already queued or running for the configuration,
    that one is answered instead. ``True`` when the job is new."""
    row = await conn.fetchrow(
        f"""
        INSERT INTO pos_jobs (config_id, owner_id, kind, trigger, steps)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (config_id, kind) WHERE state IN ('queued', 'running') DO NOTHING
        RETURNING {_COLUMNS}
        """,
        config_id,
        owner_id,
        kind,
        trigger,
        steps,
    )
    if row is not None:
        return row, True
    existing = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM pos_jobs WHERE config_id = $1 AND kind = $2"
        " AND state IN ('queued', 'running')",
        config_id,
        kind,
    )
    assert existing is not None  # the conflict was with this row (the caller's transaction)
    return existing, False


async def claim_job(conn: Connection, worker: UUID, lease_s: float) -> asyncpg.Record | None:
    """Take the oldest due job: queued, or running with an expired lease (system path).

    A job sharing a step (a resource) with a running job of its configuration is not due: it
    waits, queued, until that one ends. The database enforces it (migration 0107): when another
    process claimed an overlapping job in the same moment, this claim is refused and ``None``
    answered, to try again at the next poll."""
    try:
        async with conn.transaction():
            return await conn.fetchrow(
                f"""
                UPDATE pos_jobs SET state = 'running', lease_owner = $1,
                    lease_until = now() + make_interval(secs => $2), attempts = attempts + 1,
                    started_at = coalesce(started_at, now()), updated_at = now()
                WHERE id = (
                    SELECT id FROM pos_jobs AS q
                    WHERE ((q.state = 'queued' AND q.run_after <= now())
                           OR (q.state = 'running' AND q.lease_until < now()))
                      AND NOT EXISTS (
                          SELECT 1 FROM pos_jobs AS other
                          WHERE other.config_id = q.config_id AND other.id <> q.id
                            AND other.state = 'running' AND other.lease_until >= now()
                            AND other.steps && q.steps)
                    ORDER BY q.run_after, q.created_at
                    LIMIT 1
                    FOR UPDATE OF q SKIP LOCKED
                )
                RETURNING {_COLUMNS}
                """,
                worker,
                lease_s,
            )
    except asyncpg.ExclusionViolationError:
        return None


async def take_page_turn(conn: Connection, job_id: UUID, pages_before: int) -> None:
    """Hold, until this transaction ends, the turn of the page that follows ``pages_before``
    committed pages of the job; taken before the page's rows."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('pos job ' || $1::uuid::text), $2)",
        job_id,
        pages_before,
    )


async def wait_page_turn(conn: Connection, job_id: UUID, pages_before: int) -> None:
    """Wait until the transaction of the page before (which took its turn before its rows) has
    ended; a wait PostgreSQL sees, so a cycle with a row lock is a deadlock it breaks."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('pos job ' || $1::uuid::text), $2)",
        job_id,
        pages_before - 1,
    )


async def record_page(
    conn: Connection,
    job_id: UUID,
    worker: UUID,
    lease_s: float,
    *,
    step: int,
    position: dict[str, Any] | None,
    since: datetime | None,
    step_high_water: datetime | None,
    resource: str,
    records: int,
    pages: int = 1,
    pages_before: int | None = None,
) -> bool:
    """Commit a page's progress in the page's transaction and renew the lease; ``False`` when
    the lease is no longer this worker's, or when ``pages_before`` is given and the job has not
    that many pages committed (the page before was rolled back): the caller must roll the page
    back."""
    status: str = await conn.execute(
        """
        UPDATE pos_jobs SET step = $3, position = $4, since = $5, step_high_water = $6,
            pages = pages + $9, records = records + $8,
            progress = jsonb_set(progress, ARRAY[$7::text], jsonb_build_object(
                'pages', coalesce((progress -> $7 ->> 'pages')::int, 0) + $9,
                'records', coalesce((progress -> $7 ->> 'records')::int, 0) + $8)),
            lease_until = now() + make_interval(secs => $10), updated_at = now()
        WHERE id = $1 AND lease_owner = $2 AND state = 'running'
          AND ($11::int IS NULL OR pages = $11)
        """,
        job_id,
        worker,
        step,
        position,
        since,
        step_high_water,
        resource,
        records,
        pages,
        lease_s,
        pages_before,
    )
    return status == "UPDATE 1"


async def finish_job(conn: Connection, job_id: UUID, worker: UUID, *, error: str | None) -> bool:
    """Succeeded (``error`` None) or failed for good; ``False`` if the lease was lost."""
    status: str = await conn.execute(
        """
        UPDATE pos_jobs SET state = CASE WHEN $3::text IS NULL THEN 'succeeded' ELSE 'failed' END,
            error = $3, finished_at = now(), lease_owner = NULL, lease_until = NULL,
            updated_at = now()
        WHERE id = $1 AND lease_owner = $2 AND state = 'running'
        """,
        job_id,
        worker,
        error,
    )
    return status == "UPDATE 1"


async def release_job(
    conn: Connection, job_id: UUID, worker: UUID, *, error: str, retry_in_s: float
) -> bool:
    """Give the job back to the queue after a transient failure, to run again later from
    where it stands."""
    status: str = await conn.execute(
        """
        UPDATE pos_jobs SET state = 'queued', error = $3,
            run_after = now() + make_interval(secs => $4), lease_owner = NULL,
            lease_until = NULL, updated_at = now()
        WHERE id = $1 AND lease_owner = $2 AND state = 'running'
        """,
        job_id,
        worker,
        error,
        retry_in_s,
    )
    return status == "UPDATE 1"


async def list_jobs(conn: Connection, config_id: UUID, limit: int) -> list[asyncpg.Record]:
    """A configuration's newest jobs."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM pos_jobs WHERE config_id = $1"
        " ORDER BY created_at DESC, id LIMIT $2",
        config_id,
        limit,
    )
    return list(rows)


async def owners_due_for_schedule(conn: Connection, interval_s: float) -> list[asyncpg.Record]:
    """Active configurations whose last scheduled or manual 'all' job began longer than
    ``interval_s`` ago, or never (system path)."""
    rows = await conn.fetch(
        """
        SELECT c.id AS config_id, c.owner_id FROM pos_configs AS c
        WHERE c.is_active AND NOT EXISTS (
            SELECT 1 FROM pos_jobs AS j
            WHERE j.config_id = c.id AND j.kind = 'all'
              AND (j.state IN ('queued', 'running')
                   OR j.created_at > now() - make_interval(secs => $1)))
        """,
        interval_s,
    )
    return list(rows)
