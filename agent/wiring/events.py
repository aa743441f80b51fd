"""The event log: built with the fan-out (so the first hooks can feed it), then written, pruned and
listed for the application's lifetime; threshold alerts evaluate committed readings."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import TypeVar

from aiohttp import web

from agent.services.alerts.evaluator import AlertEvaluator
from agent.services.alerts.service import AlertService
from agent.services.events.log import EventLog
from agent.services.events.retention import EventRetention
from agent.services.events.service import EventService
from agent.services.live.fanout import EventFanout
from agent.settings import AgentSettings
from agent.store.alerts import AlertStore
from agent.store.events import EventStore
from agent.web.keys import ALERTS, CLOCK_WATCH, DATABASE, EVENT_LOG, EVENTS, READINGS
from agent.wiring.context import CleanupContext
from agent.wiring.scheduler import SCHEDULER

__all__ = ["build_event_log", "events_context", "fan_out"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def fan_out(*hooks: Callable[[T], None]) -> Callable[[T], None]:
    """One hook calling each of ``hooks`` in turn; a failing hook does not stop the others."""

    def call(item: T) -> None:
        for hook in hooks:
            try:
                hook(item)
            except Exception:
                log.exception("event hook %r failed", hook)

    return call


def build_event_log(app: web.Application, settings: AgentSettings, fanout: EventFanout) -> EventLog:
    """The event log, registered on ``app``; :func:`events_context` starts its writer."""
    events = EventLog(
        EventStore(app[DATABASE]),
        fanout.publish,
        max_queue=settings.event_queue_size,
        max_batch=settings.event_max_batch,
    )
    app[EVENT_LOG] = events
    return events


def events_context(settings: AgentSettings) -> CleanupContext:
    """Write, prune and serve the event log for the application's lifetime."""

    async def events(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        event_log = app[EVENT_LOG]
        app[EVENTS] = EventService(db, EventStore(db))
        retention = None
        if settings.event_retention_days is not None:
            keep = timedelta(days=settings.event_retention_days)
            retention = EventRetention(event_log, keep, settings.event_retention_interval_s)
        alert_store = AlertStore(db)
        evaluator = AlertEvaluator(
            alert_store,
            event_log,
            app[READINGS].writer.subscribe,
            queue_size=settings.alert_queue_size,
        )
        app[ALERTS] = AlertService(db, alert_store, evaluator)
        await event_log.start()
        if retention is not None:
            await retention.start(app[SCHEDULER])
        await evaluator.start()
        app[CLOCK_WATCH].on_moved(evaluator.readings_moved)
        try:
            yield
        finally:
            await evaluator.stop()
            if retention is not None:
                await retention.stop()
            await event_log.stop()

    return events
