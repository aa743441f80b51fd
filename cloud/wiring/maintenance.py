"""The cloud's periodic maintenance as a ``cleanup_ctx``: jobs every process checks and one runs
per period (cloud/services/periodic.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.services.periodic import PeriodicJob, PeriodicJobs
from cloud.services.rate_limits import SharedRateLimiter
from cloud.services.retention import ReadingRetention, RetentionPolicy
from cloud.settings import CloudSettings
from cloud.web.keys import DATABASE

__all__ = ["maintenance_context", "retention_policy"]

_LONGEST_RATE_WINDOW_S = 3600
"""The longest rate-limit window in use (anonymous callers, per hour)."""


def retention_policy(settings: CloudSettings) -> RetentionPolicy:
    """How the readings' partitions are kept, from the settings."""
    return RetentionPolicy(raw_days=settings.readings_retention_days)


def maintenance_context(
    settings: CloudSettings, limiter: SharedRateLimiter
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The cleanup context that runs the maintenance jobs."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        interval = settings.maintenance_interval_s
        retention = ReadingRetention(db, retention_policy(settings))
        jobs = [
            PeriodicJob("readings-partitions", interval, retention.run),
            PeriodicJob(
                "rate-limit-windows", interval, lambda: limiter.prune(_LONGEST_RATE_WINDOW_S)
            ),
        ]
        periodic = PeriodicJobs(db, jobs, check_s=min(30.0, interval))
        # Once before serving: a process that answers has done its share of what was due.
        await periodic.check_once()
        periodic.start()
        yield
        await periodic.stop()

    return context
