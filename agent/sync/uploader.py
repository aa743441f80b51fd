"""The uploader (DESIGN.md section 8): a supervised task that drains the outbox to the cloud in
signed, size- and byte-capped batches, trims what the cloud acknowledged, applies the identity
delta of each answer, and retries forever with jittered exponential back-off."""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.sync.batcher import Outgoing, build_records, cut_by_bytes, now_ms, series_ids
from agent.sync.link import CloudLink
from agent.sync.outbox import OutboxRow, OutboxStore
from agent.sync.replica import IdentityReplica
from protocol.sync import AGENT_HEADER, SIGNATURE_HEADER, Ack, Batch, Lane, encode_batch

__all__ = ["SyncPolicy", "SyncStatus", "Uploader"]

log = logging.getLogger(__name__)

PATH = "/api/v1/sync/batches"


@dataclass(frozen=True)
class SyncPolicy:
    """Batch caps, pacing, back-off and the outbox bounds (from the agent's settings)."""

    batch_max_records: int = 20_000
    batch_max_bytes: int = 2 * 1024 * 1024
    idle_interval_s: float = 5.0
    heartbeat_s: float = 4.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 300.0
    request_timeout_s: float = 30.0
    outbox_max_bytes: int = 256 * 1024 * 1024
    min_free_disk_bytes: int = 256 * 1024 * 1024


@dataclass
class SyncStatus:
    """The link as operators see it."""

    connected: bool = False
    last_error: str | None = None
    last_attempt_ms: int | None = None
    round_trip_ms: int = 0
    bytes_sent: int = 0
    """Compressed batch bytes posted since start (what the link costs)."""


class UploadRefused(Exception):
    """The cloud answered something other than an ack."""

    def __init__(self, status: int, body: bytes, retry_after: float | None) -> None:
        super().__init__(f"cloud answered {status}: {body[:200].decode(errors='replace')}")
        self.status = status
        self.retry_after = retry_after


class Uploader:
    """Owns the upload loop of a paired agent."""

    def __init__(
        self,
        link: CloudLink,
        key: Ed25519PrivateKey,
        outbox: OutboxStore,
        replica: IdentityReplica,
        policy: SyncPolicy,
        state_dir: Path,
        *,
        jitter: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self._link = link
        self._key = key
        self._outbox = outbox
        self._replica = replica
        self._policy = policy
        self._state_dir = state_dir
        self._jitter = jitter
        self._latest_sent = False
        self._last_post = 0.0
        self.status = SyncStatus()
        self._session: aiohttp.ClientSession | None = None

    async def run(self) -> None:
        """Upload until cancelled; failures back off up to ``backoff_max_s`` and retry."""
        timeout = aiohttp.ClientTimeout(total=self._policy.request_timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            self._session = session
            failures = 0
            while True:
                try:
                    more = await self.step()
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # supervised: any failure is logged and retried
                    failures += 1
                    delay = self._backoff(failures, err)
                    self.status.connected = False
                    self.status.last_error = str(err)
                    log.warning("sync failed (%d in a row), retrying in %.1f s: %s",
                                failures, delay, err)  # fmt: skip
                    await asyncio.sleep(delay)
                    continue
                failures = 0
                if not more:
                    # Idle: wake at least every heartbeat, so a revocation made in the cloud
                    # takes effect here within about one heartbeat (issue 16).
                    await asyncio.sleep(min(self._policy.idle_interval_s, self._policy.heartbeat_s))

    def _backoff(self, failures: int, err: Exception) -> float:
        cap = self._policy.backoff_max_s
        if isinstance(err, UploadRefused) and err.retry_after is not None:
            return min(cap, err.retry_after)
        ceiling = min(cap, self._policy.backoff_initial_s * 2 ** min(failures - 1, 30))
        return self._jitter(ceiling / 2, ceiling)

    async def step(self) -> bool:
        """One batch (or an identity refresh when idle); ``True`` if more is waiting."""
        await self._enforce_cap()
        rows, more = await self._select()
        # With nothing to send, an empty batch every heartbeat asks for a newer identity delta
        # (the cloud answers none when the replica's version is current).
        if not rows and time.monotonic() - self._last_post < self._policy.heartbeat_s:
            return False
        rows = cut_by_bytes(rows, self._policy.batch_max_bytes) if rows else []
        series = await self._outbox.series(series_ids(rows))
        outgoing = build_records(rows, series)
        ack = await self._post(outgoing)
        await self._outbox.acknowledge(
            ack.acked_seq, outgoing.seqs, ack.rejected + outgoing.dropped
        )
        if ack.identity is not None:
            await self._replica.apply(ack.identity)
        return more or len(rows) >= self._policy.batch_max_records

    async def _select(self) -> tuple[list[OutboxRow], bool]:
        """Priority rows first; then, after an outage, the newest reading of each series;
        then the bulk backlog, oldest first."""
        limit = self._policy.batch_max_records
        rows = await self._outbox.pending(Lane.PRIORITY, limit)
        if rows:
            return rows, True
        backlog = await self._outbox.unsent_count(Lane.BULK)
        if backlog > limit and not self._latest_sent:
            self._latest_sent = True
            return await self._outbox.latest_per_series(limit), True
        if backlog <= limit:
            self._latest_sent = False
        return await self._outbox.pending(Lane.BULK, limit), backlog > limit

    async def _post(self, outgoing: Outgoing) -> Ack:
        assert self._session is not None, "run() owns the HTTP session"
        batch = Batch(
            agent_id=self._link.agent_id,
            sent_at=now_ms(),
            records=tuple(outgoing.records),
            ranges=tuple(outgoing.ranges),
            identity_version=await self._replica.version(),
        )
        body, signature = encode_batch(batch, self._key)
        headers = {
            AGENT_HEADER: self._link.agent_id,
            SIGNATURE_HEADER: signature,
            "Content-Type": "application/octet-stream",
        }
        started = time.monotonic()
        self._last_post = started
        self.status.bytes_sent += len(body)
        self.status.last_attempt_ms = now_ms()
        async with self._session.post(
            self._link.cloud_url + PATH, data=body, headers=headers
        ) as resp:
            answer = await resp.read()
            if resp.status != 200:
                retry = resp.headers.get("Retry-After")
                raise UploadRefused(resp.status, answer, float(retry) if retry else None)
        self.status.connected = True
        self.status.last_error = None
        self.status.round_trip_ms = round((time.monotonic() - started) * 1000)
        return Ack.model_validate_json(answer)

    async def _enforce_cap(self) -> None:
        """Over the byte cap or under the free-disk watermark: roll the oldest raw readings
        up (to 90 % of the cap, or by a tenth of the outbox when the disk is short)."""
        figures = await self._outbox.figures()
        excess = figures.bytes - self._policy.outbox_max_bytes
        if excess > 0:
            excess += self._policy.outbox_max_bytes // 10
        free = await asyncio.to_thread(lambda: shutil.disk_usage(self._state_dir).free)
        if free < self._policy.min_free_disk_bytes:
            excess = max(excess, figures.bytes // 10)
        if excess > 0:
            count = await self._outbox.roll_up_oldest(excess)
            log.warning("outbox full (%d bytes): rolled %d raw readings up", figures.bytes, count)
