"""The agent's one scheduler: every timed job runs on it, and each capability takes its jobs away
when it stops."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.services.periodic import PeriodicJob
from agent.wiring.scheduler import SCHEDULER


async def test_retention_and_checks_run_on_the_one_scheduler_and_leave_with_the_agent(
    make_agent: Any,
) -> None:
    agent = await make_agent(event_retention_days=30)
    scheduler = agent.client.app[SCHEDULER]
    jobs = {job.id for job in scheduler.get_jobs()}
    assert {"reading-retention", "event-retention", "harvest-watch"} <= jobs

    await agent.client.close()

    assert not scheduler.running
    assert scheduler.get_jobs() == []


async def test_a_failed_run_is_retried_at_the_next_interval() -> None:
    scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
    scheduler.start()
    runs: list[int] = []
    second = asyncio.Event()

    async def work() -> None:
        runs.append(len(runs) + 1)
        if len(runs) == 1:
            raise RuntimeError("the first run fails")
        second.set()

    job = PeriodicJob("flaky", work, interval_s=0.05, first_after_s=0)
    job.start(scheduler)
    try:
        async with asyncio.timeout(10):  # a guard against hanging, not a measurement
            await second.wait()
    finally:
        await job.stop()
        scheduler.shutdown(wait=False)
    assert runs[:2] == [1, 2]
    assert scheduler.get_jobs() == []


async def test_a_run_cancelled_by_stop_ends_quietly_without_an_error_in_the_log(
    caplog: Any,
) -> None:
    """The start-up failure message must stay one line: a run interrupted by its own job's stop()
    is not a failure, so neither the job nor apscheduler logs it as one."""
    scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
    scheduler.start()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = PeriodicJob("long-run", work, interval_s=60, first_after_s=0)
    job.start(scheduler)
    try:
        async with asyncio.timeout(10):  # a guard against hanging, not a measurement
            await started.wait()
        caplog.clear()
        await job.stop()
        await asyncio.sleep(0)  # let apscheduler see the run's outcome
    finally:
        scheduler.shutdown(wait=False)
    assert cancelled.is_set()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert scheduler.get_jobs() == []
