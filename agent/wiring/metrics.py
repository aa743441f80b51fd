"""The agent's /metrics: HTTP traffic (protocol.http.metrics) and the agent's own figures."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping

from aiohttp import web
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from agent.devices.modbus.bus import LinkStats
from agent.process_io import process_io
from agent.services.readings.writer import COMMIT_BUCKETS_S
from agent.settings import AgentSettings
from agent.store.devices import DeviceStore
from agent.store.notify import pending_notifications
from agent.sync.runtime import SyncReport
from agent.web.keys import (
    CLIMATE_RUNTIME,
    DATABASE,
    DEVICE_RUNTIME,
    NOTIFY_DELIVERER,
    READINGS,
    STREAMS,
    SYNC,
    WEBHOOK_DELIVERER,
)
from agent.wiring.ops import MAINTENANCE
from integrations.webhooks.agent_side.store import WebhookStore
from protocol.http.metrics import MetricsAccess, install_metrics, parse_networks

__all__ = ["install_agent_metrics"]

log = logging.getLogger(__name__)
_P = "farm_agent"


class _AgentFigures(Collector):
    """Reads the running agent's counters at scrape time (nothing is instrumented twice)."""

    def __init__(self, app: web.Application) -> None:
        self._app = app
        self.devices: dict[str, int] = {}
        self.sync: SyncReport | None = None
        self.webhooks_pending = 0
        self.notifications_pending = 0
        self.staged = 0

    async def refresh(self) -> None:
        """Figures that need the database or the sync runtime."""
        app = self._app
        if DATABASE not in app:
            return
        self.devices = await DeviceStore(app[DATABASE]).availability_counts()
        self.webhooks_pending = await WebhookStore(app[DATABASE]).pending_count()
        self.notifications_pending = await pending_notifications(app[DATABASE])
        if READINGS in app:
            self.staged = await app[READINGS].staged()
        try:
            self.sync = await app[SYNC].report() if SYNC in app else None
        except Exception:  # a scrape reports what it can
            log.warning("sync figures unavailable for metrics", exc_info=True)
            self.sync = None

    def collect(self) -> Iterator[Metric]:
        """Every figure of the agent as a metric family."""
        app = self._app
        io = process_io()
        if io is not None:
            # The SD card wears by these bytes: rate() of them against the card's endurance.
            yield _counter(
                "storage_written_bytes",
                "Bytes this process wrote to storage (write_bytes of /proc/self/io)",
                io.write_bytes,
            )
            yield _counter(
                "write_call_bytes", "Bytes this process handed to write() (wchar)", io.wchar
            )
        if DEVICE_RUNTIME in app:
            yield from _modbus_figures(app[DEVICE_RUNTIME].modbus.links())
        if DATABASE in app:
            yield _counter(
                "database_commits", "Write transactions committed", app[DATABASE].commits
            )
        if READINGS in app:
            yield _gauge("readings_staged", "Readings in the stage, not yet folded", self.staged)
            yield _counter(
                "readings_folded",
                "Readings moved from the stage into the series tables",
                app[READINGS].folded,
            )
            writer = app[READINGS].writer
            stats = writer.stats
            yield _counter("readings_ingested", "Readings committed", stats.committed)
            dropped = CounterMetricFamily(
                f"{_P}_readings_dropped", "Readings not stored, by reason", labels=["reason"]
            )
            for reason, count in (
                ("queue_full", stats.queue_full),
                ("writer_closed", stats.closed),
                ("commit_failed", stats.lost),
                ("unknown_device", stats.unknown_device),
                ("invalid", sum(stats.rejected.values())),
            ):
                dropped.add_metric([reason], count)
            yield dropped
            yield _counter(
                "readings_duplicates", "Re-delivered readings stored once", stats.duplicates
            )
            yield _gauge("reading_queue_depth", "Readings waiting for a commit", writer.queued)
            times = stats.commit_times
            cumulative, buckets = 0, []
            for bound, count in zip((*COMMIT_BUCKETS_S, math.inf), times.counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if math.isinf(bound) else str(bound), cumulative))
            yield HistogramMetricFamily(
                f"{_P}_reading_commit_seconds",
                "Time one reading batch commit took",
                buckets=buckets,
                sum_value=times.total_s,
            )
            yield _counter("reading_commits", "Reading batches committed", stats.commits)
            yield _counter(
                "reading_commit_failures",
                "Reading batch commits that failed",
                stats.commit_failures,
            )
        if DEVICE_RUNTIME in app:
            runtime = app[DEVICE_RUNTIME]
            state = runtime.mqtt_state()
            yield _gauge(
                "mqtt_connected", "1 while the broker link is up", int(state == "connected")
            )
            if runtime.client is not None:
                mqtt = runtime.client.stats
                yield _counter("mqtt_messages_received", "MQTT messages received", mqtt.received)
                yield _counter("mqtt_messages_dropped", "MQTT messages dropped", mqtt.dropped)
                yield _counter("mqtt_messages_published", "MQTT messages published", mqtt.published)
                yield _counter("mqtt_connects", "MQTT connections made", mqtt.connects)
        if CLIMATE_RUNTIME in app:
            actions = CounterMetricFamily(
                f"{_P}_climate_actions", "Climate loop decisions by kind", labels=["kind"]
            )
            for kind, count in sorted(app[CLIMATE_RUNTIME].actions.items()):
                actions.add_metric([kind], count)
            yield actions
        if STREAMS in app:
            yield _gauge("websocket_clients", "Open WebSocket streams", app[STREAMS].connections)
        if WEBHOOK_DELIVERER in app:
            deliverer = app[WEBHOOK_DELIVERER]
            yield _counter(
                "webhook_deliveries", "Webhook messages answered 2xx", deliverer.delivered
            )
            yield _counter(
                "webhook_failed_attempts", "Webhook posts that failed", deliverer.failed_attempts
            )
            yield _gauge(
                "webhook_pending", "Webhook messages waiting to be delivered", self.webhooks_pending
            )
        if NOTIFY_DELIVERER in app:
            sender = app[NOTIFY_DELIVERER]
            yield _counter("notifications_sent", "Notifications the services took", sender.sent)
            yield _counter(
                "notification_failed_attempts",
                "Notification sends that failed",
                sender.failed_attempts,
            )
            yield _gauge(
                "notifications_pending",
                "Notifications waiting to be sent (held by quiet hours included)",
                self.notifications_pending,
            )
        yield from _storage_figures(self._app)
        devices = GaugeMetricFamily(
            f"{_P}_devices", "Devices by availability", labels=["availability"]
        )
        for availability, count in sorted(self.devices.items()):
            devices.add_metric([availability], count)
        yield devices
        if self.sync is not None and self.sync.paired:
            out = self.sync.outbox
            yield _gauge("sync_outbox_records", "Outbox records waiting", out.records)
            yield _gauge("sync_outbox_bytes", "Outbox bytes waiting", out.bytes)
            yield _gauge("sync_lag_seq", "Sequence numbers not yet acknowledged", out.lag)
            age = self.sync.oldest_unsent_age_s
            yield _gauge("sync_oldest_unsent_age_seconds", "Age of the oldest unsent", age or 0)
            yield _gauge(
                "sync_connected", "1 while the cloud answers", int(self.sync.status.connected)
            )


def _storage_figures(app: web.Application) -> Iterator[Metric]:
    """The room to write and the writes refused for lack of space."""
    if DATABASE in app:
        yield _counter(
            "storage_write_refusals",
            "Writes the storage refused for lack of space (each is retried or answered 503)",
            app[DATABASE].refusals,
        )
    if MAINTENANCE not in app:
        return
    storage = app[MAINTENANCE].storage
    room = storage.room
    if room is not None:
        yield _gauge(
            "storage_free_bytes",
            "Bytes new writes can still take: free disk and free database pages, or under"
            " database_max_bytes",
            room.free,
        )
        yield _gauge("disk_free_bytes", "Free bytes on the state directory's disk", room.disk_free)
    full = storage.now() == "full"
    yield _gauge("storage_full", "1 while the storage refuses writes for lack of space", full)


def _modbus_figures(links: Mapping[str, LinkStats]) -> Iterator[Metric]:
    """Per Modbus device: requests by outcome, and whether it is shown online."""
    requests = CounterMetricFamily(
        f"{_P}_modbus_requests",
        "Modbus polls of a device by outcome (answered, timeout, crc_error, exception,"
        " connection_error)",
        labels=["device_id", "outcome"],
    )
    online = GaugeMetricFamily(
        f"{_P}_modbus_device_online", "1 while a Modbus device answers", labels=["device_id"]
    )
    for device_id, stats in links.items():
        for outcome, count in (
            ("answered", stats.answered),
            ("timeout", stats.timeouts),
            ("crc_error", stats.crc_errors),
            ("exception", stats.exceptions),
            ("connection_error", stats.connection_errors),
        ):
            requests.add_metric([device_id, outcome], count)
        online.add_metric([device_id], 1.0 if stats.online else 0.0)
    yield requests
    yield online


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{_P}_{name}", text, value=value)


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{_P}_{name}", text, value=value)


def install_agent_metrics(app: web.Application, settings: AgentSettings) -> None:
    """Serve /metrics with the agent's figures, under the settings' access rule."""
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    access = MetricsAccess(token, parse_networks(settings.metrics_allowed_networks))
    figures = _AgentFigures(app)
    install_metrics(app, access, _P, collectors=[figures], refresh=figures.refresh)
