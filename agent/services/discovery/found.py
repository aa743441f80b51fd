"""The Found list: candidates any source announces, shown until a person adds or ignores one.

``FoundDevices.announce`` is the one entry point for every source (MQTT announcements, a bus
scan, ...). ``accept`` registers a candidate through ``DeviceService.register``, so it is checked
exactly like ``POST /devices``; nothing is registered without that call.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent.devices.found import Candidate
from agent.services.devices.registry import DeviceService
from agent.store.found_devices import FoundDeviceStore
from protocol.access import require_role
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import Principal, Role
from protocol.schemas.devices import Address, Device, DeviceCreate
from protocol.schemas.discovery import (
    DiscoveredDevice,
    DiscoveredDeviceAccept,
    DiscoveredDeviceList,
    DiscoveredQuery,
)
from protocol.timefmt import iso, utcnow

__all__ = ["Candidate", "FoundDevices"]

log = logging.getLogger(__name__)

_ADDRESS: TypeAdapter[Any] = TypeAdapter(Address)
_MAX_READINGS = 32
# A relay switches pumps, valves or lights; proposed as a light until a person says otherwise.
_RELAY_KIND = "light"
# Who may add devices (a farm manager's farm is checked when adding).
_MANAGERS = (Role.ADMIN, Role.FARM_MANAGER)


class FoundDevices:
    """Candidates as people see them, and the entry point sources announce through."""

    def __init__(
        self,
        store: FoundDeviceStore,
        devices: DeviceService,
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._devices = devices
        self._now = now

    async def announce(self, candidate: Candidate) -> str | None:
        """Add or refresh a candidate: its id while it is listed, None once it is hidden
        (ignored, added, or a registered device has its address). ValueError if malformed."""
        profiles = self._devices.profiles
        if candidate.profile_id is not None and candidate.profile_id not in profiles:
            raise ValueError(f"unknown firmware profile {candidate.profile_id!r}")
        try:
            address = _ADDRESS.validate_python(dict(candidate.address))
        except ValidationError as err:
            raise ValueError(f"invalid address {dict(candidate.address)!r}: {err}") from err
        kind = candidate.kind
        if kind is None and candidate.profile_id is not None:
            kind = profiles[candidate.profile_id].kind
        if kind in (None, "relay"):
            kind = _RELAY_KIND if kind == "relay" else "sensor"
        readings = {
            str(name): float(value)
            for name, value in list(candidate.readings.items())[:_MAX_READINGS]
            if isinstance(value, int | float) and math.isfinite(value)
        }
        row = {
            "source": candidate.source[:64],
            "key": candidate.key[:128],
            "name": (candidate.name.strip() or candidate.key)[:200],
            "model": candidate.model[:200],
            "profile": candidate.profile_id,
            "kind": kind,
            "address": address.model_dump(exclude_none=True),
            "address_key": getattr(address, "topic_base", None) or getattr(address, "port", ""),
            "readings": readings,
        }
        found_id, new, listed = await self._store.upsert(row, iso(self._now()))
        if new:
            log.info(
                "found %s device %s (%s) at %s",
                candidate.source,
                candidate.key,
                candidate.profile_id,
                row["address_key"],
            )
        return found_id if listed else None

    async def list(self, principal: Principal, query: DiscoveredQuery) -> DiscoveredDeviceList:
        """Candidates not yet added nor ignored, most recently heard first."""
        require_role(principal, *_MANAGERS)
        rows, total = await self._store.listed(query.limit, query.offset)
        return DiscoveredDeviceList(
            discovered_devices=[self._view(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def accept(
        self, principal: Principal, found_id: str, body: DiscoveredDeviceAccept
    ) -> Device:
        """Register a candidate on a farm (the checks of POST /devices); the device."""
        require_role(principal, *_MANAGERS)
        row = await self._store.get(found_id)
        if row is None:
            raise NotFound("Found device not found")
        profile = body.profile or row["profile"]
        if profile is None:
            raise ValidationFailed.of([("profile", "no shipped firmware profile fits; give one")])
        address = body.address.model_dump() if body.address else json.loads(row["address"])
        fields = {
            "name": body.name,
            "farm_id": str(body.farm_id),
            "location": body.location,
            "kind": body.kind or row["kind"],
            "profile": profile,
            "address": address,
        }
        try:
            create = DeviceCreate.model_validate(fields)
        except ValidationError as err:
            raise ValidationFailed.of(
                (".".join(str(part) for part in issue["loc"]), issue["msg"])
                for issue in err.errors()
            ) from None
        device = await self._devices.register(principal, create)
        await self._store.added(found_id, str(device.id))
        return device

    async def ignore(self, principal: Principal, found_id: str) -> None:
        """Hide a candidate for good."""
        require_role(principal, *_MANAGERS)
        if not await self._store.ignore(found_id, principal.user_id, iso(self._now())):
            raise NotFound("Found device not found")

    def _view(self, row: sqlite3.Row) -> DiscoveredDevice:
        profile = self._devices.profiles.get(row["profile"]) if row["profile"] else None
        readings = json.loads(row["readings"])
        units = {m.name: m.unit for m in profile.metrics if m.name in readings} if profile else {}
        return _view(row, readings, units)


def _view(row: sqlite3.Row, readings: dict[str, float], units: dict[str, str]) -> DiscoveredDevice:
    return DiscoveredDevice(
        id=row["id"],
        source=row["source"],
        key=row["key"],
        name=row["name"],
        model=row["model"],
        profile=row["profile"],
        kind=row["kind"],
        address=_ADDRESS.validate_python(json.loads(row["address"])),
        readings=readings,
        units=units,
        first_seen=row["first_seen"],
        last_seen=row["last_seen"],
    )
