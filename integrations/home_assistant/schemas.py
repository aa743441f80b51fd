"""The hub integration: status, entities, sensors, control, and which farm each entity is of.

Served by the agent (the hub on its LAN) and the cloud (through the access proxy) alike. Each hub
entity belongs to a farm: the farm its hub area is mapped to, or the one an admin assigned it to
(``integrations.home_assistant.ownership``). Reads show the entities of farms the caller may
read; control needs control of the entity's farm, and the action is recorded in that farm's event
log with who asked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, StringConstraints, model_validator

from protocol.schemas.auth import UuidIn
from protocol.schemas.common import ApiModel, Schema

__all__ = [
    "TARGET_KEYS",
    "HubAreaAssignment",
    "HubAssignmentList",
    "HubAssignmentRequest",
    "HubControlRequest",
    "HubControlResult",
    "HubDeviceList",
    "HubDeviceQuery",
    "HubEntity",
    "HubEntityAssignment",
    "HubIrrigationControl",
    "HubLightControl",
    "HubPendingClose",
    "HubSensor",
    "HubSensorList",
    "HubStatus",
]

EntityId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+\.[a-z0-9_]+$", max_length=255)]
Domain = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$", max_length=64)]
AreaId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$", max_length=255)]
"""An area's id in the hub's area registry (e.g. ``rack_1``)."""

TARGET_KEYS = frozenset({"entity_id", "area_id", "device_id", "floor_id", "label_id", "target"})
"""Service data keys that name what a service acts on: a request names its one entity, and its
``data`` may not widen that to other entities, areas, devices, floors or labels."""


class HubPendingClose(Schema):
    """An irrigation the server will close: when promised, and how the tries are going."""

    entity_id: str
    farm_id: str
    close_at: str = Field(description="When the caller was promised the close")
    next_try_at: str = Field(description="close_at, or the next retry after a failed try")
    attempts: int = Field(description="Tries the hub did not take so far")
    last_error: str | None = Field(description="The error code of the last failed try")


class HubStatus(Schema):
    """Whether the integration is on, configured and reaching the hub."""

    enabled: bool
    configured: bool
    reachable: bool | None = Field(description="None when not configured")
    hub_version: str | None
    proxy_in_use: bool
    last_error: str | None = Field(description="The error code of the last failed hub call")
    latency_ms: float | None
    pending_closes: list[HubPendingClose] = Field(
        default_factory=list,
        description="Irrigations opened for a duration, not yet closed (farms the caller sees)",
    )


class HubEntity(Schema):
    """One hub entity: a light, switch, fan, valve, sensor..."""

    entity_id: str
    domain: str
    name: str
    state: str
    area: str | None = None
    area_id: str | None = Field(default=None, description="The hub's id of its area")
    farm_id: str | None = Field(
        default=None, description="The farm it belongs to; None: unassigned (admins only)"
    )
    attributes: dict[str, Any]
    last_changed: str | None = None


class HubDeviceQuery(ApiModel):
    """Filters of the device list."""

    domain: Domain | None = None
    area: Annotated[str, StringConstraints(max_length=100)] | None = None


class HubDeviceList(Schema):
    """The hub's entities, sorted by id, with how many there are per domain."""

    devices: list[HubEntity]
    total: int
    domains: dict[str, int]


class HubSensor(Schema):
    """A sensor entity with its value, unit and device class."""

    entity_id: str
    name: str
    state: str
    value: float | None = Field(description="The state as a number, None if it is not one")
    unit: str | None
    device_class: str | None
    last_changed: str | None = None


class HubSensorList(Schema):
    """Every sensor entity of the hub."""

    sensors: list[HubSensor]


class _Control(ApiModel):
    farm_id: UuidIn | None = Field(
        default=None,
        description="The entity's farm (checked when given); required only for an admin acting"
        " on an entity of no farm, whose event log then records the action",
    )


class HubControlRequest(_Control):
    """Call a hub service on an entity: ``action`` is the service of the entity's domain."""

    entity_id: EntityId
    action: Domain = Field(description="The service, e.g. turn_on, turn_off, toggle")
    data: dict[str, Any] = Field(
        default_factory=dict,
        max_length=50,
        description="Service data; never a target (entity_id, area_id, device_id, floor_id,"
        " label_id, target)",
    )

    @model_validator(mode="after")
    def _no_targets(self) -> Self:
        named = sorted(TARGET_KEYS & self.data.keys())
        if named:
            raise ValueError(f"data may not name targets ({', '.join(named)}): use entity_id")
        return self


class HubLightControl(_Control):
    """Switch a light; ``brightness`` 0-100 %, ``color_temp_kelvin`` its colour temperature."""

    entity_id: Annotated[EntityId, StringConstraints(pattern=r"^light\.")]
    state: Literal["on", "off"]
    brightness: int | None = Field(default=None, ge=0, le=100, strict=True)
    color_temp_kelvin: int | None = Field(default=None, ge=1000, le=20000, strict=True)

    @model_validator(mode="after")
    def _off_alone(self) -> Self:
        if self.state == "off" and (self.brightness is not None or self.color_temp_kelvin):
            raise ValueError("an off light takes no brightness or colour temperature")
        return self


class HubIrrigationControl(_Control):
    """Open, close or position a valve (or switch a pump/valve switch) for an optional time.

    With ``duration_s`` the server (agent or cloud) closes it again itself after that long,
    retrying until the hub takes it, whatever happens to the caller, the network or the server
    meanwhile (the close is on record before the valve opens). An open without a duration keeps
    a close already pending; a close by hand cancels it.
    """

    entity_id: Annotated[EntityId, StringConstraints(pattern=r"^(valve|switch)\.")]
    action: Literal["open", "close", "position"]
    position: int | None = Field(default=None, ge=0, le=100, strict=True)
    duration_s: int | None = Field(default=None, ge=1, le=86_400, strict=True)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.action == "position") != (self.position is not None):
            raise ValueError("position is given with the position action, and only then")
        if self.action == "position" and not self.entity_id.startswith("valve."):
            raise ValueError("only a valve takes a position")
        if self.action == "close" and self.duration_s is not None:
            raise ValueError("closing takes no duration")
        return self


class HubControlResult(Schema):
    """What the hub did: the service called and the states that changed."""

    entity_id: str
    service: str
    changed: list[HubEntity]
    event_id: str
    close_at: str | None = Field(
        default=None, description="When the server closes it again (irrigation with a duration)"
    )


class HubAssignmentRequest(ApiModel):
    """PUT an area's or an entity's farm."""

    farm_id: UuidIn


class HubAreaAssignment(Schema):
    """A hub area mapped to a farm: its entities (those not assigned on their own) are the
    farm's."""

    area_id: str
    farm_id: str


class HubEntityAssignment(Schema):
    """An entity assigned to a farm, whatever its area."""

    entity_id: str
    farm_id: str


class HubAssignmentList(Schema):
    """Every area mapping and entity assignment."""

    areas: list[HubAreaAssignment]
    entities: list[HubEntityAssignment]
