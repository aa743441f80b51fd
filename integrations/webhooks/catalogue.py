"""The webhook event types a receiver can subscribe to, by its three categories, and the
event-log kinds each one is made from.

The agent's event log kinds (``alert_raised``, ``device_offline``...) are internal names; a
receiver sees dotted types (``alert.raised``) and subscribes to them. Both databases hold the
mapping in their ``webhook_event_kinds`` table, seeded by a migration from :data:`EVENT_KINDS`
(a test keeps the tables and this module equal), so the trigger that queues deliveries in the
same transaction as the event reads it there.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CATEGORIES",
    "EVENT_KINDS",
    "HARVESTED",
    "TEST_EVENT",
    "EventCategory",
    "WebhookEventType",
    "category_of",
]


class EventCategory(StrEnum):
    """The webhook categories: device alerts, system events, harvests."""

    DEVICE_ALERTS = "device_alerts"
    SYSTEM_EVENTS = "system_events"
    HARVEST_NOTIFICATIONS = "harvest_notifications"


class WebhookEventType(StrEnum):
    """Every type a webhook may subscribe to."""

    ALERT_RAISED = "alert.raised"
    ALERT_CLEARED = "alert.cleared"
    DEVICE_ONLINE = "device.online"
    DEVICE_OFFLINE = "device.offline"
    DEVICE_FAULT = "device.fault"
    FARM_STATUS_CHANGED = "farm.status_changed"
    WEBHOOK_DISABLED = "webhook.disabled"
    GROW_PLAN_HARVEST_READY = "grow_plan.harvest_ready"
    GROW_PLAN_HARVESTED = "grow_plan.harvested"


CATEGORIES: dict[WebhookEventType, EventCategory] = {
    WebhookEventType.ALERT_RAISED: EventCategory.DEVICE_ALERTS,
    WebhookEventType.ALERT_CLEARED: EventCategory.DEVICE_ALERTS,
    WebhookEventType.DEVICE_ONLINE: EventCategory.SYSTEM_EVENTS,
    WebhookEventType.DEVICE_OFFLINE: EventCategory.SYSTEM_EVENTS,
    WebhookEventType.DEVICE_FAULT: EventCategory.SYSTEM_EVENTS,
    WebhookEventType.FARM_STATUS_CHANGED: EventCategory.SYSTEM_EVENTS,
    WebhookEventType.WEBHOOK_DISABLED: EventCategory.SYSTEM_EVENTS,
    WebhookEventType.GROW_PLAN_HARVEST_READY: EventCategory.HARVEST_NOTIFICATIONS,
    WebhookEventType.GROW_PLAN_HARVESTED: EventCategory.HARVEST_NOTIFICATIONS,
}

EVENT_KINDS: dict[str, WebhookEventType] = {
    "alert_raised": WebhookEventType.ALERT_RAISED,
    "alert_cleared": WebhookEventType.ALERT_CLEARED,
    "device_online": WebhookEventType.DEVICE_ONLINE,
    "device_offline": WebhookEventType.DEVICE_OFFLINE,
    "device_fault": WebhookEventType.DEVICE_FAULT,
    "farm_status": WebhookEventType.FARM_STATUS_CHANGED,
    "webhook_disabled": WebhookEventType.WEBHOOK_DISABLED,
    "harvest_ready": WebhookEventType.GROW_PLAN_HARVEST_READY,
}
"""Event-log kind -> webhook type. ``grow_plan.harvested`` comes from the grow plan itself
becoming harvested (a trigger on the plan), not from an event."""

HARVESTED = WebhookEventType.GROW_PLAN_HARVESTED

TEST_EVENT = "webhook.test"
"""Sent by ``POST /webhooks/{id}/test`` whatever the webhook subscribes to; not subscribable."""


def category_of(event_type: str) -> EventCategory | None:
    """The category of a subscribable type, else ``None``."""
    try:
        return CATEGORIES[WebhookEventType(event_type)]
    except ValueError:
        return None
