"""What a notification rule may choose: the event-log kinds a person is told of, and the
severities. Each kind is the agent's own event kind (agent/services/events, alerts, ops, sync),
so a rule matches the event log one to one."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["REPEATABLE", "SEVERITIES", "NotifyKind"]


class NotifyKind(StrEnum):
    """Event kinds a rule can send to people."""

    ALERT_RAISED = "alert_raised"
    """A threshold alert was raised (value against threshold)."""
    DEVICE_OFFLINE = "device_offline"
    """A device went offline (and stayed so for the rule's ``offline_after_min``)."""
    DEVICE_FAULT = "device_fault"
    COMMAND_FAILED = "command_failed"
    SYNC_STUCK = "sync_stuck"
    """The cloud keeps refusing the agent's batches."""
    DISK_LOW = "disk_low"
    DISK_FULL = "disk_full"
    DATABASE_SALVAGED = "database_salvaged"
    BACKUP_FAILED = "backup_failed"
    HARVEST_READY = "harvest_ready"
    CONTACT_POINT_FAILING = "contact_point_failing"
    """Another contact point has failed for a long time."""
    WEBHOOK_DISABLED = "webhook_disabled"


SEVERITIES = ("debug", "info", "warning", "error", "critical")

REPEATABLE = (NotifyKind.ALERT_RAISED, NotifyKind.DEVICE_OFFLINE)
"""Kinds whose condition can still hold later: repeated and escalated while it does."""
