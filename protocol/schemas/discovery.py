"""Found devices: what the agent heard announce itself on the farm's network, not yet added.

``GET /discovered-devices`` lists them with the proposed firmware profile and address and the
readings heard so far; ``accept`` registers one (the same checks as ``POST /devices``),
``ignore`` hides it for good.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import Field, StringConstraints

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid
from protocol.schemas.devices import Address, DeviceKind, Location, Name

__all__ = ["DiscoveredDevice", "DiscoveredDeviceAccept", "DiscoveredDeviceList", "DiscoveredQuery"]

ProfileId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=64)]


class DiscoveredDevice(Schema):
    """A device heard announcing itself, with what registering it would use."""

    id: Uuid
    source: str = Field(description="tasmota, esphome, zigbee2mqtt, shelly, ...")
    key: str = Field(description="The device's identity in its source (MAC, IEEE address, id)")
    name: str = Field(description="The name it announced; proposed as the device's name")
    model: str
    profile: str | None = Field(description="Proposed firmware profile (None: none fits)")
    kind: str = Field(description="Proposed kind (a relay's can be changed when adding)")
    address: Address
    readings: dict[str, float] = Field(description="Latest values heard, metric -> value")
    units: dict[str, str] = Field(description="Each reading's unit, from the proposed profile")
    first_seen: Timestamp
    last_seen: Timestamp


class DiscoveredDeviceList(Schema):
    """GET /discovered-devices."""

    discovered_devices: list[DiscoveredDevice]
    total: int
    limit: int
    offset: int


class DiscoveredQuery(PageQuery):
    """Query of GET /discovered-devices."""


class DiscoveredDeviceAccept(ApiModel):
    """POST /discovered-devices/{id}/accept: where the device goes, and optional overrides."""

    farm_id: UUID
    name: Name
    location: Location = ""
    kind: DeviceKind | None = Field(
        None, description="Defaults to the proposed kind (a relay: pump, valve or light)"
    )
    profile: ProfileId | None = Field(None, description="Another firmware profile than proposed")
    address: Address | None = Field(None, description="Another address than proposed")
