"""Runs one claimed sync job: resource by resource, page by page, each page applied to the
mirror in one transaction together with the job's progress and a renewal of its lease.

A restart resumes from the last committed page (the job row holds the provider's cursor, the
lower time bound and the high-water mark of the step). A page fetched twice — after a crash
between fetch and commit — is applied twice harmlessly: rows are keyed on the provider's ids
and only a newer ``updated_at`` changes one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from cloud.pos_provider.client import Page, PosClient
from cloud.pos_provider.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailable,
)
from cloud.pos_provider.resources import ORDERS_LOCATIONS_PER_REQUEST, RESOURCES, Resource
from cloud.services.pos.configs import ACCESS_TOKEN
from cloud.services.pos.links import ProviderLinks
from cloud.services.pos.mirror_rows import PageRows, later, page_rows
from cloud.services.pos.secrets import PosSecrets
from cloud.store import pos_configs, pos_jobs, pos_mirror
from cloud.store.db import Connection, Database
from cloud.store.pos_mirror import MirrorColumns
from farmkit.backoff import Backoff
from farmkit.secretbox import SecretBoxError
from farmkit.tasks import cancel_and_wait

__all__ = ["JobPolicy", "LeaseLost", "SyncRunner"]

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker holds the job now: this one stops without committing more."""


@dataclass(frozen=True)
class JobPolicy:
    """Leases and retries of jobs."""

    lease_s: float = 60.0
    max_attempts: int = 8
    retry_initial_s: float = 5.0
    retry_max_s: float = 300.0
    page_writers: int = 2
    """Pages of a job written at once, each on its own connection (their positions are still
    recorded in the provider's order)."""

    def retry_in(self, attempts: int) -> float:
        """Seconds before a job that failed transiently runs again."""
        return Backoff(self.retry_initial_s, self.retry_max_s).delay(max(0, attempts - 1))


@dataclass
class _StepWrites:
    """What the page writes of a step share: whether its objects are expected to be new to the
    mirror (a resource never pulled to its end before), so that a page is inserted without
    ``ON CONFLICT``; cleared by the first page that meets an object already there."""

    new_only: bool


@dataclass
class _Position:
    step: int
    chunk: int
    cursor: str | None
    since: datetime | None
    high_water: datetime | None
    started: bool


def _fetch(
    client: PosClient, resource: Resource, at: _Position, chunks: list[list[str]]
) -> Coroutine[Any, Any, Page]:
    """Fetch the page at ``at`` (its cursor and location chunk are taken now: ``at`` moves on
    while the fetch runs ahead)."""
    chunk = chunks[at.chunk] if resource.by_location else []
    return client.page(resource, at.cursor, at.since, chunk)


def _made_into_rows(resource: Resource, page: Page) -> PageRows:
    """The page's objects made ready to write."""
    return page_rows(resource.name, page.items, page.items_text)


_NO_ROWS = PageRows(MirrorColumns.of([]), frozenset(), 0, None, None)


class SyncRunner:
    """Pulls the provider's objects into the mirror for claimed jobs."""

    def __init__(
        self,
        db: Database,
        secrets: PosSecrets,
        links: ProviderLinks,
        worker_id: UUID,
        policy: JobPolicy,
    ) -> None:
        self._db = db
        self._secrets = secrets
        self._links = links
        self._worker = worker_id
        self._policy = policy

    async def run_next(self) -> bool:
        """Claim and run one due job; ``False`` when none was due."""
        async with self._db.as_system() as conn:
            job = await pos_jobs.claim_job(conn, self._worker, self._policy.lease_s)
        if job is None:
            return False
        log.info("POS job %s (%s) claimed, attempt %d", job["id"], job["kind"], job["attempts"])
        try:
            await self._run(job)
        except LeaseLost:
            log.warning("POS job %s: lease lost to another worker; stopped", job["id"])
        except ProviderAuthError as err:
            await self._finish(job, f"{err.describe()} (renew the configuration's access token)")
        except ProviderRequestError as err:
            await self._finish(job, err.describe())
        except Exception as err:  # transient, or a fault of ours: retried, then given up
            if not isinstance(err, ProviderUnavailable | ProviderError | OSError):
                log.exception("POS job %s failed unexpectedly", job["id"])
            detail = err.describe() if isinstance(err, ProviderError) else type(err).__name__
            if job["attempts"] >= self._policy.max_attempts:
                await self._finish(job, f"gave up after {job['attempts']} attempts: {detail}")
            else:
                async with self._db.as_system() as conn:
                    await pos_jobs.release_job(
                        conn,
                        job["id"],
                        self._worker,
                        error=detail,
                        retry_in_s=self._policy.retry_in(job["attempts"]),
                    )
                log.warning("POS job %s: %s; will resume", job["id"], detail)
        return True

    async def _finish(self, job: asyncpg.Record, error: str | None) -> None:
        async with self._db.as_system() as conn:
            await pos_jobs.finish_job(conn, job["id"], self._worker, error=error)
        if error:
            log.warning("POS job %s failed: %s", job["id"], error)
        else:
            log.info("POS job %s done: %d pages", job["id"], job["pages"])

    async def _run(self, job: asyncpg.Record) -> None:
        async with self._db.as_system() as conn:
            config = await pos_configs.config_by_id(conn, job["config_id"])
            cursors = {
                c["resource"]: c["high_water"]
                for c in await pos_mirror.cursors(conn, job["config_id"])
            }
        if config is None:
            return  # deleted with its jobs; nothing to finish
        try:
            token = self._secrets.open(config["id"], ACCESS_TOKEN, config["access_token"])
        except SecretBoxError:
            await self._finish(job, "the access token does not decrypt under CLOUD_SECRET_KEY")
            return
        client = self._links.client(config["environment"], token)
        steps: list[str] = list(job["steps"])
        stored: dict[str, Any] = job["position"] or {}
        at = _Position(
            step=job["step"],
            chunk=int(stored.get("chunk", 0)),
            cursor=stored.get("cursor"),
            since=job["since"],
            high_water=job["step_high_water"],
            started=job["position"] is not None,
        )
        # The next page is fetched while this one is made into rows and the pages before it are
        # written, several at once: the provider's latency, our work and the database's
        # overlap. (The cursors chain the fetches: the next is asked for as soon as this one's
        # cursor is known, before its rows are made.)
        ahead: asyncio.Task[Page] | None = None
        chunks: list[list[str]] | None = None
        step_writes = _StepWrites(new_only=False)
        writes = _PageWrites(self._policy.page_writers)
        pages_before: int = job["pages"]
        try:
            while at.step < len(steps):
                resource = RESOURCES[steps[at.step]]  # type: ignore[index]
                if not at.started:
                    at.since = cursors.get(resource.name) if resource.since else None
                    at.high_water = at.since
                    at.chunk, at.cursor, at.started = 0, None, True
                    chunks = None
                if chunks is None:
                    chunks = await self._location_chunks(config, resource)
                    step_writes = _StepWrites(new_only=resource.name not in cursors)
                if resource.by_location and not chunks:
                    page, done = _NO_ROWS, True
                else:
                    if ahead is not None:
                        fetched, ahead = await ahead, None
                    else:
                        fetched = await _fetch(client, resource, at, chunks)
                    if fetched.cursor:
                        at.cursor = fetched.cursor
                        done = False
                    elif resource.by_location and at.chunk + 1 < len(chunks):
                        at.chunk, at.cursor = at.chunk + 1, None
                        done = False
                    else:
                        done = True
                    if not done:
                        ahead = asyncio.create_task(_fetch(client, resource, at, chunks))
                        await asyncio.sleep(0)  # the request goes out before the rows are made
                    page = _made_into_rows(resource, fetched)
                    at.high_water = later(at.high_water, page.latest)
                write = functools.partial(
                    self._write,
                    job,
                    replace(at),
                    resource,
                    page,
                    done,
                    config,
                    pages_before,
                    step_writes,
                )
                await writes.start(write, page.ids)
                pages_before += 1
                if done:
                    await writes.drain()
                    at.step += 1
                    at.started = False
                    if at.step >= len(steps):
                        await self._finish(job, None)
        finally:
            await writes.cancel()
            if ahead is not None:
                with contextlib.suppress(Exception):  # a failure of the page ahead is moot now
                    await cancel_and_wait(ahead)

    async def _location_chunks(self, config: asyncpg.Record, resource: Resource) -> list[list[str]]:
        if not resource.by_location:
            return []
        ids = list(config["location_ids"])
        if not ids:
            async with self._db.as_system() as conn:
                ids = await pos_mirror.location_ids(conn, config["id"])
        size = ORDERS_LOCATIONS_PER_REQUEST
        return [ids[i : i + size] for i in range(0, len(ids), size)]

    async def _write(
        self,
        job: asyncpg.Record,
        at: _Position,
        resource: Resource,
        page: PageRows,
        done: bool,
        config: asyncpg.Record,
        pages_before: int,
        step: _StepWrites,
        turn: asyncio.Event,
    ) -> None:
        """Apply a page and the job's new position atomically, fenced on the lease. The
        position is recorded only once the page before has committed: its transaction holds
        its turn from before its rows to its end, and this one waits for it before recording
        (when the page before was rolled back, this one is rolled back too)."""
        config_id, owner_id = job["config_id"], job["owner_id"]
        async with self._db.as_system() as conn:
            await pos_jobs.take_page_turn(conn, job["id"], pages_before)
            turn.set()
            await self._write_rows(conn, config_id, owner_id, resource, page, step)
            if resource.name == "locations" and page.first is not None:
                merchant = page.first.get("merchant_id")
                if merchant:
                    await pos_configs.set_merchant(conn, config_id, str(merchant))
            await pos_jobs.wait_page_turn(conn, job["id"], pages_before)
            if done:
                await pos_mirror.advance_cursor(
                    conn, config_id, owner_id, resource.name, at.high_water
                )
            kept = await pos_jobs.record_page(
                conn,
                job["id"],
                self._worker,
                self._policy.lease_s,
                step=at.step + 1 if done else at.step,
                position=None if done else {"chunk": at.chunk, "cursor": at.cursor},
                since=None if done else at.since,
                step_high_water=None if done else at.high_water,
                resource=resource.name,
                records=page.records,
                pages_before=pages_before,
            )
            if not kept:
                raise LeaseLost()  # rolls the page back

    @staticmethod
    async def _write_rows(
        conn: Connection,
        config_id: UUID,
        owner_id: UUID,
        resource: Resource,
        page: PageRows,
        step: _StepWrites,
    ) -> None:
        """A page's rows into the mirror: inserted while the step's objects are expected to be
        new (checked by the primary key all the same), upserted once one was not."""
        if step.new_only:
            if await pos_mirror.insert_new_objects(
                conn, config_id, owner_id, resource.name, page.columns
            ):
                return
            step.new_only = False
        await pos_mirror.upsert_objects(conn, config_id, owner_id, resource.name, page.columns)


class _PageWrites:
    """The page writes of a job in flight, oldest first, at most ``limit`` at once; a failure
    surfaces in page order."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._flight: deque[tuple[asyncio.Task[None], frozenset[str]]] = deque()

    async def start(
        self, write: Callable[[asyncio.Event], Coroutine[Any, Any, None]], ids: frozenset[str]
    ) -> None:
        """Start ``write`` once there is room; return when it holds its turn (or has ended)."""
        if any(ids & held for _, held in self._flight):
            # A row in a page in flight: its transaction must end before this one touches the
            # row, or each would wait for the other until PostgreSQL breaks the deadlock.
            await self.drain()
        while len(self._flight) >= self._limit:
            await self._oldest()
        turn = asyncio.Event()
        task = asyncio.create_task(write(turn))
        self._flight.append((task, ids))
        waiter = asyncio.create_task(turn.wait())
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waiter)

    async def drain(self) -> None:
        """Wait for every write in flight."""
        while self._flight:
            await self._oldest()

    async def _oldest(self) -> None:
        task, _ = self._flight[0]
        try:
            await task
        finally:
            self._flight.popleft()

    async def cancel(self) -> None:
        """Stop the writes still in flight (their transactions roll back)."""
        while self._flight:
            task, _ = self._flight.popleft()
            with contextlib.suppress(Exception):  # the first failure is the one reported
                await cancel_and_wait(task)
