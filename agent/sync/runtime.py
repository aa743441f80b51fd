"""The sync task's lifetime and the figures operators read (/healthz, /supabase-items)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent.clock import AgentClock
from agent.settings import AgentSettings
from agent.store.db import Database
from agent.store.identity_replica import IdentityReplicaStore
from agent.sync.compactor import Compactor, OutboxBounds
from agent.sync.link import CloudLink, sync_key_path
from agent.sync.outbox import OutboxStore
from agent.sync.outbox_rows import OutboxFigures
from agent.sync.replica import IdentityReplica
from agent.sync.sealing import CloudSealing
from agent.sync.uploader import StuckAlert, SyncPolicy, SyncStatus, Uploader
from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait
from protocol.keyfile import load_or_create_private_key
from protocol.tokens import TokenVerifier

__all__ = ["SyncReport", "SyncRuntime", "bounds_of", "policy_of"]

log = logging.getLogger(__name__)


def policy_of(settings: AgentSettings) -> SyncPolicy:
    """The uploader's policy from the agent's settings."""
    return SyncPolicy(
        batch_max_records=settings.sync_batch_max_records,
        batch_max_bytes=settings.sync_batch_max_bytes,
        batch_max_body_bytes=settings.sync_batch_max_body_bytes,
        probe_interval_s=settings.sync_probe_interval_s,
        idle_interval_s=settings.sync_interval_s,
        heartbeat_s=settings.sync_heartbeat_s,
        backoff_initial_s=settings.sync_backoff_initial_s,
        backoff_max_s=settings.sync_backoff_max_s,
        request_timeout_s=settings.sync_request_timeout_s,
        outbox_max_bytes=settings.outbox_max_bytes,
        min_free_disk_bytes=settings.outbox_min_free_disk_bytes,
    )


def bounds_of(settings: AgentSettings) -> OutboxBounds:
    """The outbox's bounds from the agent's settings."""
    return OutboxBounds(
        max_bytes=settings.outbox_max_bytes,
        min_free_disk_bytes=settings.outbox_min_free_disk_bytes,
    )


@dataclass(frozen=True)
class SyncReport:
    """The cloud link and the outbox, for health endpoints."""

    paired: bool
    status: SyncStatus
    outbox: OutboxFigures

    @property
    def oldest_unsent_age_s(self) -> float | None:
        """Age of the oldest record not yet sent."""
        if self.outbox.oldest_unsent_ms is None:
            return None
        return max(0.0, time.time() - self.outbox.oldest_unsent_ms / 1000)


class SyncRuntime:
    """Runs the uploader while the agent is paired; notices a pairing made while it runs.

    ``farm-agent pair`` writes the link file into the state directory (atomically); an unpaired
    agent checks for it every ``sync_interval_s`` and starts syncing without a restart.
    """

    def __init__(
        self,
        settings: AgentSettings,
        db: Database,
        verifier: TokenVerifier,
        link: CloudLink | None,
        *,
        alert: StuckAlert | None = None,
        clock: AgentClock | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._db = db
        self._verifier = verifier
        self._alert = alert
        self._outbox = OutboxStore(db)
        self._uploader: Uploader | None = None
        self._task: asyncio.Task[None] | None = None
        self._compactor = Compactor(self._outbox, bounds_of(settings), settings.state_dir)
        self._compaction: asyncio.Task[None] | None = None
        self._before_catch_up: Callable[[], Awaitable[object]] | None = None
        self._link: CloudLink | None = None
        self._sealing_task: asyncio.Task[None] | None = None
        self.sealing = CloudSealing(link)
        """The cloud's sealing key (contact point URLs go up sealed to it)."""
        if link is not None:
            self._attach(link)

    def _attach(self, link: CloudLink) -> None:
        if not self._settings.sync_enabled:
            return
        self._link = link
        state_dir = self._settings.state_dir
        replica = IdentityReplica(IdentityReplicaStore(self._db), self._verifier, link, state_dir)
        key = load_or_create_private_key(sync_key_path(state_dir))
        self._uploader = Uploader(
            link,
            key,
            self._outbox,
            replica,
            policy_of(self._settings),
            on_stuck=self._alert,
            clock=self._clock,
        )
        self._uploader.before_catch_up = self._before_catch_up

    @property
    def uploading(self) -> bool:
        """Paired with a cloud and syncing (the cloud can take notifications over)."""
        return self._uploader is not None

    def before_catch_up(self, work: Callable[[], Awaitable[object]]) -> None:
        """Run ``work`` whenever the uploader resumes (start-up, the cloud back after an
        outage) before it takes the latest state: the fold of staged readings."""
        self._before_catch_up = work
        if self._uploader is not None:
            self._uploader.before_catch_up = work

    def start(self) -> None:
        """Run the uploader in the background, or wait for a pairing when not paired; keep the
        outbox within its bounds either way."""
        if self._settings.sync_enabled:
            self._compaction = asyncio.create_task(self._compactor.run(), name="sync-compactor")
        if self._uploader is not None:
            self._task = asyncio.create_task(self._uploader.run(), name="sync-uploader")
            self._fetch_sealing_key()
            log.info("sync uploader started")
        elif self._settings.sync_enabled:
            self._task = asyncio.create_task(self._await_pairing(), name="sync-await-pairing")

    async def _await_pairing(self) -> None:
        """Poll for the link file; once it is there, trust the cloud and sync."""
        state_dir = self._settings.state_dir
        while True:
            await asyncio.sleep(self._settings.sync_interval_s)
            try:
                link = CloudLink.load(state_dir)
                if link is None:
                    continue
                key = link.cloud_key  # a malformed key must not be trusted, nor stop the watch
                self._attach(link)
            except (OSError, ValueError, TypeError) as err:
                log.warning("unusable cloud link in %s: %s; checking again", state_dir, err)
                self._uploader = None
                continue
            self._verifier.trust(link.cloud_issuer, key)
            log.info("paired with %s as agent %s: sync starts", link.cloud_url, link.agent_id)
            assert self._uploader is not None  # sync_enabled, or this task would not run
            self._fetch_sealing_key()
            await self._uploader.run()
            return

    def _fetch_sealing_key(self) -> None:
        """Learn the cloud's sealing key beside the uploads, unless it is known."""
        if self.sealing.known or self._link is None:
            return
        backoff = Backoff(self._settings.sync_backoff_initial_s, self._settings.sync_backoff_max_s)
        self._sealing_task = asyncio.create_task(
            self.sealing.fetch(self._link, self._settings.state_dir, backoff),
            name="sync-sealing-key",
        )

    async def stop(self) -> None:
        """Cancel the uploader and the compactor and wait for them."""
        await cancel_and_wait(self._task, self._compaction, self._sealing_task)
        self._task = self._compaction = self._sealing_task = None

    async def report(self) -> SyncReport:
        """Figures of the link and the outbox."""
        status = self._uploader.status if self._uploader else SyncStatus()
        return SyncReport(self._uploader is not None, status, await self._outbox.figures())
