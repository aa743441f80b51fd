"""The record kinds of sync and the direction each one flows (docs/design.md section 8).

One table that both sides read: the agent uploads only kinds that flow up, and the cloud applies
only those, refusing the rest record by record. Identity (users, roles, permissions, sessions,
API keys, MFA) flows one way only, from the cloud down in the identity delta of each ack: once a
farm is paired the cloud is its identity authority, and the agent holds a replica that it never
sends back (docs/architecture.md, "Identity").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "KINDS",
    "Direction",
    "RecordKind",
    "identity_kinds",
    "refusal",
    "upload_kinds",
]


class Direction(StrEnum):
    """Which way records of a kind flow."""

    UP = "agent_to_cloud"
    """In the agent's signed batches: the agent owns the data, the cloud keeps a mirror."""
    DOWN = "cloud_to_agent"
    """In the identity delta of each ack: the cloud owns the data, the agent keeps a replica."""


@dataclass(frozen=True, slots=True)
class RecordKind:
    """One kind of record: its name on the wire and its direction."""

    name: str
    direction: Direction
    identity: bool = False


KINDS: tuple[RecordKind, ...] = (
    RecordKind("farms", Direction.UP),
    RecordKind("farm_rows", Direction.UP),
    RecordKind("racks", Direction.UP),
    RecordKind("shelves", Direction.UP),
    RecordKind("devices", Direction.UP),
    RecordKind("calibrations", Direction.UP),
    RecordKind("events", Direction.UP),
    RecordKind("grow_plans", Direction.UP),
    RecordKind("climate_settings", Direction.UP),
    RecordKind("climate_history", Direction.UP),
    RecordKind("site_settings", Direction.UP),
    # With its Apprise URL: the cloud tells these contact points of a silent farm.
    RecordKind("contact_points", Direction.UP),
    # A message the agent could not deliver, handed to the cloud to send (never by both).
    RecordKind("notifications", Direction.UP),
    RecordKind("readings", Direction.UP),
    RecordKind("readings_1m", Direction.UP),
    RecordKind("readings_1h", Direction.UP),
    RecordKind("rollups", Direction.UP),
    RecordKind("users", Direction.DOWN, identity=True),
    RecordKind("permissions", Direction.DOWN, identity=True),
    RecordKind("sessions", Direction.DOWN, identity=True),
    RecordKind("api_keys", Direction.DOWN, identity=True),
)

_BY_NAME = {kind.name: kind for kind in KINDS}


def upload_kinds() -> frozenset[str]:
    """Kinds an agent may put in a batch."""
    return frozenset(k.name for k in KINDS if k.direction is Direction.UP)


def identity_kinds() -> frozenset[str]:
    """Kinds that belong to the cloud's identity authority."""
    return frozenset(k.name for k in KINDS if k.identity)


def refusal(name: str) -> str | None:
    """Why a batch record of kind ``name`` must be refused, or ``None`` if it may apply."""
    kind = _BY_NAME.get(name)
    if kind is None:
        return "unknown record kind"
    if kind.direction is not Direction.UP:
        return "identity flows from the cloud only" if kind.identity else "kind flows down only"
    return None
