"""Durable irrigation closes: a valve opened for a duration is closed again whatever happens.

A pending close is written to the side's database (``CloseStore``: the agent's SQLite file, the
cloud's PostgreSQL) *before* the hub is asked to open, so a restart or a kill -9 at any moment
leaves either no open valve or a close on record. ``IrrigationCloser`` runs the due closes: at
start-up (an overdue close runs at once), when a close falls due, and when told of a new one
(``wake``). A close the hub does not take (unreachable, timed out, refused) stays on record and is
retried with jittered back-off until it does; only a close the hub took is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from farmkit.backoff import Backoff
from farmkit.tasks import cancel_and_wait
from integrations.home_assistant.errors import HubError
from protocol.timefmt import utcnow

__all__ = ["CloseStore", "IrrigationCloser", "PendingClose"]

log = logging.getLogger(__name__)

#: The longest single wait: a wall-clock change is noticed within it.
_MAX_WAIT_S = 60.0
_BATCH = 50


@dataclass(frozen=True)
class PendingClose:
    """One promised close: the entity, the farm whose log records it, and when."""

    id: str
    entity_id: str
    farm_id: str
    close_at: datetime
    """When the caller was promised the close."""
    requested_by: str | None
    next_try_at: datetime
    """``close_at`` until a try fails, then the next retry."""
    attempts: int = 0
    last_error: str | None = None


class CloseStore(Protocol):
    """Where one side keeps its pending closes (at most one per entity)."""

    async def put(self, close: PendingClose) -> PendingClose | None:
        """Store ``close``, replacing the entity's pending one; return the one replaced."""
        ...

    async def restore(self, new: PendingClose, previous: PendingClose | None) -> None:
        """Undo :meth:`put`: drop ``new`` and put ``previous`` (if any) back."""
        ...

    async def cancel(self, entity_id: str) -> None:
        """Forget the entity's pending close (it was closed by hand)."""
        ...

    async def due(self, now: datetime, limit: int) -> list[PendingClose]:
        """Closes whose next try is at or before ``now``, oldest first, claimed for this
        process (a store shared by several processes hands each close to one of them)."""
        ...

    async def done(self, close: PendingClose) -> None:
        """The hub took ``close``: remove it (unless a newer close replaced it meanwhile)."""
        ...

    async def retry_later(self, close: PendingClose, at: datetime, error: str) -> None:
        """Count a failed try of ``close`` and try again at ``at``."""
        ...

    async def next_try_at(self) -> datetime | None:
        """The earliest next try of any pending close."""
        ...

    async def pending(self) -> list[PendingClose]:
        """Every pending close, soonest first."""
        ...


Close = Callable[[PendingClose], Awaitable[None]]


class IrrigationCloser:
    """Runs the due closes of a ``CloseStore`` in an owned background task.

    ``close`` performs one close (the hub's service call and its event) and raises ``HubError``
    when the hub did not take it. ``poll_s`` bounds every wait, so closes written by another
    process sharing the store are seen within it (the cloud runs several processes).
    """

    def __init__(
        self,
        store: CloseStore,
        close: Close,
        *,
        backoff: Backoff,
        poll_s: float = _MAX_WAIT_S,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self._close = close
        self._backoff = backoff
        self._poll_s = min(poll_s, _MAX_WAIT_S)
        self._now = now
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the due closes now and from then on."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="hub-irrigation-closer")

    async def stop(self) -> None:
        """Stop; pending closes stay on record for the next start."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def wake(self) -> None:
        """A close was added or changed: look at the store again."""
        self._wake.set()

    async def run_due(self) -> int:
        """Try every close that is due; return how many the hub took."""
        taken = 0
        for close in await self.store.due(self._now(), _BATCH):
            try:
                await self._close(close)
            except HubError as err:
                error = err.code
            except Exception as err:  # a store or recorder failure: retried like a hub one
                log.exception("closing %s failed", close.entity_id)
                error = type(err).__name__
            else:
                await self.store.done(close)
                taken += 1
                continue
            delay = self._backoff.delay(close.attempts)
            log.warning(
                "closing %s failed (%s, attempt %d); next try in %.1f s",
                close.entity_id,
                error,
                close.attempts + 1,
                delay,
            )
            await self.store.retry_later(close, self._now() + timedelta(seconds=delay), error)
        return taken

    async def _run(self) -> None:
        failures = 0
        while True:
            self._wake.clear()
            try:
                await self.run_due()
                wait = await self._until_next()
                failures = 0
            except Exception:
                log.exception("the irrigation closer failed; trying again")
                wait = self._backoff.delay(failures)
                failures += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _until_next(self) -> float:
        upcoming = await self.store.next_try_at()
        if upcoming is None:
            return self._poll_s
        return max(0.0, min(self._poll_s, (upcoming - self._now()).total_seconds()))
