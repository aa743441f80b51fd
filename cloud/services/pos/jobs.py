"""Starting sync jobs and reporting their state (user path)."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import asyncpg

from cloud.pos_provider.resources import ResourceName
from cloud.services.pos.access import require_pos_role
from cloud.store import pos_configs, pos_jobs, pos_mirror
from cloud.store.db import Connection, Database
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.schemas.pos import PosJob, PosSyncKind, PosSyncStarted, PosSyncStatus
from protocol.timefmt import iso

__all__ = ["STEPS", "PosJobService", "enqueue"]

STEPS: dict[PosSyncKind, tuple[ResourceName, ...]] = {
    "all": (
        "locations",
        "products",
        "customers",
        "orders",
        "payments",
        "refunds",
        "disputes",
        "payouts",
        "team_members",
        "inventory",
    ),
    "customers": ("customers",),
    "orders": ("locations", "orders"),
    "payments": ("payments", "refunds"),
    "products": ("products", "inventory"),
}
"""The resources each kind of job pulls, in order (orders need the locations first)."""

_STATUS_JOBS = 20


async def enqueue(
    conn: Connection, config_id: UUID, owner_id: UUID, kind: PosSyncKind, trigger: str
) -> tuple[asyncpg.Record, bool]:
    """Queue a job of ``kind`` (or find the live one); ``True`` when it is new."""
    return await pos_jobs.enqueue_job(conn, config_id, owner_id, kind, list(STEPS[kind]), trigger)


def job_model(row: asyncpg.Record) -> PosJob:
    """A job as answered."""

    def stamp(name: str) -> str | None:
        value = row[name]
        return None if value is None else iso(value)

    steps = list(row["steps"])
    current = steps[row["step"]] if row["state"] == "running" and row["step"] < len(steps) else None
    return PosJob(
        id=str(row["id"]),
        kind=row["kind"],
        trigger=row["trigger"],
        state=row["state"],
        steps=steps,
        current_step=current,
        pages=row["pages"],
        records=row["records"],
        progress=dict(row["progress"]),
        error=row["error"],
        attempts=row["attempts"],
        created_at=iso(row["created_at"]),
        started_at=stamp("started_at"),
        finished_at=stamp("finished_at"),
        updated_at=iso(row["updated_at"]),
    )


class PosJobService:
    """Owners start syncs of their configurations and follow them."""

    def __init__(self, db: Database, wake: Callable[[], None]) -> None:
        self._db = db
        self._wake = wake

    async def start(
        self, principal: Principal, kind: PosSyncKind, config_id: str
    ) -> PosSyncStarted:
        """Queue a job (202); a job of this kind already queued or running is answered again."""
        require_pos_role(principal)
        key = UUID(config_id)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            config = await pos_configs.get_config(conn, key)
            if config is None:
                raise NotFound("POS configuration not found")
            row, _ = await enqueue(conn, key, config["owner_id"], kind, "manual")
        self._wake()
        return PosSyncStarted(
            job_id=str(row["id"]), config_id=config_id, kind=kind, state=row["state"]
        )

    async def status(self, principal: Principal, config_id: str) -> PosSyncStatus:
        """The configuration's recent jobs and per resource its last completed pull."""
        require_pos_role(principal)
        key = UUID(config_id)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if await pos_configs.get_config(conn, key) is None:
                raise NotFound("POS configuration not found")
            jobs = await pos_jobs.list_jobs(conn, key, _STATUS_JOBS)
            cursors = await pos_mirror.cursors(conn, key)
        return PosSyncStatus(
            config_id=config_id,
            jobs=[job_model(j) for j in jobs],
            last_synced_at={c["resource"]: iso(c["last_synced_at"]) for c in cursors},
        )
