"""Readings: the batched writer, retention and the query service."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.services.clock_watch import ClockWatch, realign_interval_jobs
from agent.services.ingest.reading_runtime import ReadingRuntime
from agent.services.readings.query import ReadingQuery
from agent.services.readings.retention import ReadingRetention, RetentionPolicy
from agent.services.readings.sensor_readings import SensorReadings
from agent.services.readings.writer import ReadingWriter
from agent.settings import AgentSettings
from agent.store.devices import DeviceStore
from agent.store.readings import ReadingStore
from agent.web.keys import (
    CALIBRATION,
    CLOCK,
    CLOCK_WATCH,
    DATABASE,
    EVENT_FANOUT,
    FOREGROUND,
    HEALTH,
    READINGS,
    SENSORS,
)
from agent.wiring.context import CleanupContext
from agent.wiring.scheduler import SCHEDULER
from protocol.live.outbox import Stream

__all__ = ["readings_context"]

DAY_S = 86_400.0
# No API request for this long: nobody is waiting on a command, reading batches may grow.
_QUIET_S = 2.0


def _days(days: float | None) -> float | None:
    return None if days is None else days * DAY_S


def readings_context(settings: AgentSettings) -> CleanupContext:
    """Run the reading writer and retention for the application's lifetime."""

    async def readings(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        reading_store = ReadingStore(db, staged=settings.reading_fold_interval_s > 0)
        policy = RetentionPolicy(
            raw_s=_days(settings.retention_raw_days),
            minute_s=_days(settings.retention_minute_days),
            hour_s=_days(settings.retention_hour_days),
        )
        writer = ReadingWriter(
            reading_store,
            calibration=app[CALIBRATION].correction,
            batch_interval=settings.reading_batch_interval_s,
            min_commit_interval=settings.reading_min_commit_interval_s,
            commit_rows=settings.reading_commit_rows,
            max_batch=settings.reading_max_batch,
            busy=app[FOREGROUND].busy,
            quiet_batch=settings.reading_quiet_batch,
            quiet=lambda: app[FOREGROUND].quiet(_QUIET_S),
            watched=lambda: app[EVENT_FANOUT].subscribers(Stream.SENSOR_DATA) > 0,
            unwatched_interval=settings.reading_unwatched_batch_interval_s,
            max_queue=settings.reading_queue_size,
            clock_skew_ms=round(settings.reading_clock_skew_s * 1000),
            max_ahead_ms=round(settings.reading_max_clock_ahead_s * 1000),
            clock=app[CLOCK],
        )
        # Moves what the writer stamped while the clock was not set: the writer's own store,
        # whose cache of receive stamps the move clears.
        watch = ClockWatch(app[CLOCK], reading_store)
        watch.on_jump(realign_interval_jobs(app[SCHEDULER]))
        devices = DeviceStore(db)
        watch.on_jump(lambda jump: devices.move_stamps(jump.first_ms, jump.last_ms, jump.delta_ms))
        app[CLOCK_WATCH] = watch
        retention = ReadingRetention(reading_store, policy, chunk=settings.retention_chunk_rows)
        runtime = ReadingRuntime(
            writer,
            retention,
            retention_interval_s=settings.retention_interval_s,
            fold=reading_store.fold,
            fold_interval_s=settings.reading_fold_interval_s,
            stage_size=reading_store.stage_size,
            foldable=reading_store.foldable,
            fold_rows=settings.reading_fold_rows,
        )
        query = ReadingQuery(
            db,
            reading_store,
            policy,
            point_budget=settings.reading_point_budget,
            max_point_budget=settings.reading_max_point_budget,
        )
        app[SENSORS].attach(SensorReadings(query))
        app[CALIBRATION].attach(latest_raw=runtime.latest)
        await runtime.start(app[SCHEDULER])
        app[READINGS] = runtime
        app[HEALTH].watch_component("reading writer", lambda: writer.running)
        watch.start()
        yield
        await watch.stop()
        await runtime.stop()

    return readings
