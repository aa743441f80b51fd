"""The text a person reads: what happened, where (farm, device and its place), the value against
its threshold, since when, and a link to the alert in the web app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Message", "Where", "compose", "test_message"]

_STEP_PREFIX = {"repeat": "Still: ", "escalation": "Escalated: "}


@dataclass(frozen=True, slots=True)
class Where:
    """The names the message gives the event's place."""

    farm: str
    device: str | None = None
    location: str | None = None
    """The device's place (a row, rack or shelf named in its location)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message: title and body as plain text; ``link`` opens the alert in the web app;
    ``acknowledge_link`` acknowledges it with a POST (a button where the service has them)."""

    title: str
    body: str
    link: str | None = None
    acknowledge_link: str | None = None


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def compose(
    event: Mapping[str, Any],
    where: Where,
    *,
    step: str = "first",
    link: str | None = None,
    acknowledge_link: str | None = None,
) -> Message:
    """The message of an event snapshot (``kind``, ``severity``, ``message``, ``ts``, ``data``)."""
    data = event.get("data") or {}
    severity = str(event.get("severity", "info"))
    what = str(event.get("message") or event.get("kind") or "event")
    title = f"{_STEP_PREFIX.get(step, '')}[{severity.upper()}] {where.farm}: {what}"
    lines = [what]
    place = [f"Farm {where.farm}"]
    if where.location:
        place.append(where.location)
    if where.device:
        place.append(f"device {where.device}")
    lines.append("Where: " + ", ".join(place))
    if isinstance(data, Mapping) and "threshold" in data:
        value = data.get("raised_value", data.get("value"))
        metric = data.get("metric", "value")
        direction = data.get("direction", "beyond")
        lines.append(
            f"Value: {metric} {_number(value)} {direction} threshold {_number(data['threshold'])}"
        )
    since = (data.get("raised_at") if isinstance(data, Mapping) else None) or event.get("ts")
    if since:
        lines.append(f"Since: {since}")
    if link:
        lines.append(f"Open: {link}")
    return Message(title=title, body="\n".join(lines), link=link, acknowledge_link=acknowledge_link)


def test_message(contact_point: str, farm: str) -> Message:
    """What the test button sends."""
    return Message(
        title=f"[TEST] {farm}: test message",
        body=f"A test message to contact point {contact_point!r} of farm {farm}.",
    )
