"""The WebSocket streams described for the docs page: the ``x-streams`` extension of the OpenAPI
document (OpenAPI has no WebSocket operations). The client messages' schemas come from the models
the server parses them with (protocol/streams.py), so the description cannot drift from them."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from protocol.streams import (
    CLOSE_FORBIDDEN,
    CLOSE_TOO_MANY,
    CLOSE_UNAUTHENTICATED,
    ClientMessage,
)

__all__ = ["streams_document"]

_EVENTS = {
    "/ws/farm-status": {
        "summary": "Farm status, alerts raised and cleared, notices (harvest due, climate)",
        "events": {
            "farm-status": "A farm's status changed: data.status, data.previous_status",
            "alert": "An alert raised or cleared: data.kind (alert_raised|alert_cleared),"
            " data.event_id, metric, value",
            "climate": "The climate loop acted: data.event (action|failsafe|hold), speed,"
            " reasons, cause (the readings), fans",
            "notice": "Other farm events worth a look: data.kind, data.message",
        },
    },
    "/ws/sensor-data": {
        "summary": "Every committed, calibrated reading of the farm's sensors",
        "events": {
            "reading": "data.device_id, metric, unit, value, raw (before calibration),"
            " received_at; timestamp is the reading's own time",
            "readings": "Instead of reading, after a subscribe with batch_ms: at most one per"
            " batch_ms, data.readings a list of what each reading carried (its data and its"
            " timestamp), oldest first",
        },
    },
    "/ws/device-events": {
        "summary": "Device availability, reported state, command outcomes and faults",
        "events": {
            "status-update": "data.device_id and data.event: availability (status online|"
            "offline), state (state), command (outcome, observed)",
            "error": "data.device_id, data.event (fault or command) and data.message",
            "hub-state": "a hub entity changed: data.entity_id, domain, old_state and new_state"
            " (state, attributes, last_changed), on the stream of the entity's farm only",
        },
    },
}


def streams_document(*, max_connections_per_user: int, heartbeat_s: float) -> dict[str, Any]:
    """What a client of the three streams needs: paths, auth, messages, close codes, limits."""
    return {
        "authentication": (
            "The access_token query parameter, an Authorization: Bearer header, or a first"
            ' message {"type": "auth", "token": ...} (or "api_key") within 5 s.'
        ),
        "envelope": (
            'Every server message is {"type", "farm_id", "data", "timestamp", "seq"}; seq counts'
            " the messages of the connection from 1. Besides each stream's events the server"
            " sends ready (after authentication), subscribed, heartbeat, missed (data.count"
            " events dropped for a slow reader), pong and rejected."
        ),
        "client_messages": TypeAdapter(ClientMessage).json_schema(),
        "close_codes": {
            str(CLOSE_UNAUTHENTICATED): "no valid credentials (refresh the token and reconnect)",
            str(CLOSE_FORBIDDEN): "the credentials may not see the requested farm",
            str(CLOSE_TOO_MANY): f"over {max_connections_per_user} connections of one user",
        },
        "heartbeat_s": heartbeat_s,
        "streams": _EVENTS,
    }
