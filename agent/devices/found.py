"""What a discovery source proposes: a device heard on the farm's network, not yet registered.

Every source (MQTT announcements of Tasmota, ESPHome, zigbee2mqtt and Shelly in
``agent.devices.announcements``, a bus scan, ...) builds a ``Candidate`` and hands it to the
Found store's one entry point, ``await found.announce(candidate)``; nothing is registered
until a person adds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Announce", "Candidate"]


@dataclass(frozen=True)
class Candidate:
    """A device a source found.

    ``source`` names the source (``tasmota``, ``esphome``, ``zigbee2mqtt``, ``shelly``...);
    ``key`` identifies the device within it (a MAC, an IEEE address, a Shelly id) so a second
    announcement updates the same candidate. ``address`` is the registration address as the
    devices API takes it (``{"transport": "mqtt", "topic_base": ..., "variables": {...}}`` or
    ``{"transport": "serial", "port": ...}``); ``profile_id`` the proposed firmware profile
    (None: found, but no shipped profile fits). ``kind`` defaults to the profile's kind.
    ``readings`` are the latest values heard, metric -> value; an announcement without
    readings keeps those already known.
    """

    source: str
    key: str
    profile_id: str | None
    address: Mapping[str, Any]
    name: str
    readings: Mapping[str, float] = field(default_factory=dict)
    model: str = ""
    kind: str | None = None


Announce = Callable[[Candidate], Awaitable[str | None]]
"""The Found store's entry point, as a source sees it: the candidate's id while it is listed,
None once a person ignored or added it."""
