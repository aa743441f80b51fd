"""Periodic jobs shared by the cloud's processes (0050_shared_state.sql), system path.

A run is claimed by moving ``next_run_at`` past now in a conditional UPDATE: processes that find
the job due at the same moment queue on its row lock, and every one but the first then finds it
no longer due. A run that dies half-way is simply run again at the next period; the jobs are
idempotent.
"""

from __future__ import annotations

from cloud.store.db import Connection

__all__ = ["claim_run", "finish_run", "job_runs"]


async def claim_run(conn: Connection, name: str, interval_s: float, worker: str) -> bool:
    """Claim this period's run of job ``name`` (created on first use); ``False`` when it is not
    due or another process claimed it."""
    await conn.execute(
        "INSERT INTO cloud_jobs (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", name
    )
    claimed: bool | None = await conn.fetchval(
        """
        UPDATE cloud_jobs SET next_run_at = now() + make_interval(secs => $2),
            last_started_at = now(), last_worker = $3, runs = runs + 1
        WHERE name = $1 AND next_run_at <= now()
        RETURNING true
        """,
        name,
        interval_s,
        worker,
    )
    return bool(claimed)


async def finish_run(conn: Connection, name: str, error: str | None) -> None:
    """Record the end of a run and its error, if any."""
    await conn.execute(
        "UPDATE cloud_jobs SET last_finished_at = now(), last_error = $2 WHERE name = $1",
        name,
        error,
    )


async def job_runs(conn: Connection, name: str) -> int:
    """How many runs of job ``name`` were claimed so far, by every process."""
    runs: int | None = await conn.fetchval("SELECT runs FROM cloud_jobs WHERE name = $1", name)
    return runs or 0
