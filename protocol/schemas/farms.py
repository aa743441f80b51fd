"""Farms, rows, racks and shelves (docs/design.md section 12)."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, Strict, ValidationInfo, field_validator, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

FarmStatus = Literal["active", "maintenance", "inactive", "archived"]
"""A farm in use or under maintenance; inactive and archived complete its life cycle."""
StructureStatus = Literal["active", "inactive", "maintenance"]
"""Rows, racks and shelves: active, or out of use (inactive, maintenance)."""

Name = Field(min_length=1, max_length=200)
Species = Field(default=None, min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")

# Numbers in bodies are strict: JSON true, "3" or 3.5 is a wrong type (422), not a position.
Position = Annotated[int, Strict(), Field(ge=0, le=100_000)]
"""Place of a row in its farm or of a rack in its row; unique among its siblings."""
Level = Annotated[int, Strict(), Field(ge=0, le=1_000)]
"""Shelf level within its rack, 0 at the bottom; unique within the rack."""
PlantCount = Annotated[int, Strict(), Field(ge=0, le=1_000_000)]
Centimetres = Annotated[float, Strict(), Field(gt=0, le=100_000)]


class _Update(ApiModel):
    """A PUT body: the fields given replace the stored ones; at least one must be given."""

    @field_validator("*", mode="after")
    @classmethod
    def _not_null(cls, value: object, info: ValidationInfo) -> object:
        # Runs only for fields the body gives (defaults are not validated), so an absent field
        # stays unchanged while an explicit null is refused where the column may not be empty.
        if value is None and info.field_name in _NOT_NULL:
            raise ValueError("may not be null")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> _Update:
        if not self.model_fields_set:
            raise ValueError("at least one field must be given")
        return self


_NOT_NULL = frozenset(
    {
        "name",
        "status",
        "position",
        "level",
        "plant_capacity",
        "current_plant_count",
        "description",
        "location",
    }
)


# Farms ----------------------------------------------------------------------------------------


class FarmCreate(ApiModel):
    """POST /farms/."""

    name: str = Name
    description: str = Field("", max_length=2000)
    location: str = Field("", max_length=200)
    status: FarmStatus = "active"


class FarmUpdate(_Update):
    """PUT /farms/{farm_id}: the fields given replace the stored ones."""

    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)
    location: str | None = Field(None, max_length=200)
    status: FarmStatus | None = None


class Farm(Schema):
    """A farm as created or updated."""

    id: Uuid
    name: str
    description: str
    location: str
    status: str
    created_at: Timestamp
    updated_at: Timestamp


class FarmMetrics(Schema):
    """Counts computed from the hierarchy."""

    total_rows: int
    total_racks: int
    total_shelves: int
    active_plants: int


class FarmListItem(Farm):
    """A farm in the list, with metrics."""

    metrics: FarmMetrics


class FarmList(Schema):
    """GET /farms/."""

    farms: list[FarmListItem]
    total: int
    limit: int
    offset: int


class FarmRowSummary(Schema):
    """A row inside farm detail."""

    id: Uuid
    name: str
    position: int
    status: str


class FarmDeviceSummary(Schema):
    """A device inside farm detail."""

    id: Uuid
    name: str
    type: str
    status: str


class FarmDetail(Farm):
    """GET /farms/{farm_id}."""

    rows: list[FarmRowSummary]
    devices: list[FarmDeviceSummary]


class FarmListQuery(PageQuery):
    """Query of GET /farms/."""

    search: str | None = Field(None, max_length=200, description="Case-insensitive name match")


# Rows -----------------------------------------------------------------------------------------


class RowCreate(ApiModel):
    """POST /rows/."""

    farm_id: UUID
    name: str = Name
    position: Position
    status: StructureStatus = "active"


class RowUpdate(_Update):
    """PUT /rows/{row_id}; the parent farm cannot change."""

    name: str | None = Field(None, min_length=1, max_length=200)
    position: Position | None = None
    status: StructureStatus | None = None


class Row(Schema):
    """A row."""

    id: Uuid
    farm_id: Uuid
    name: str
    position: int
    status: str


class RowListItem(Row):
    """A row in the list, with counts below it."""

    rack_count: int
    shelf_count: int
    plant_capacity: int


class RowList(Schema):
    """GET /rows/."""

    rows: list[RowListItem]
    total: int
    limit: int
    offset: int


class RowListQuery(PageQuery):
    """Query of GET /rows/."""

    farm_id: UUID


# Racks ----------------------------------------------------------------------------------------


class RackCreate(ApiModel):
    """POST /racks/."""

    row_id: UUID
    name: str = Name
    position: Position
    height_cm: Centimetres | None = None
    width_cm: Centimetres | None = None
    depth_cm: Centimetres | None = None
    status: StructureStatus = "active"


class RackUpdate(_Update):
    """PUT /racks/{rack_id}; the parent row cannot change."""

    name: str | None = Field(None, min_length=1, max_length=200)
    position: Position | None = None
    height_cm: Centimetres | None = None
    width_cm: Centimetres | None = None
    depth_cm: Centimetres | None = None
    status: StructureStatus | None = None


class Rack(Schema):
    """A rack."""

    id: Uuid
    row_id: Uuid
    name: str
    position: int
    height_cm: float | None
    width_cm: float | None
    depth_cm: float | None
    status: str


class RackList(Schema):
    """GET /racks/."""

    racks: list[Rack]
    total: int
    limit: int
    offset: int


class RackListQuery(PageQuery):
    """Query of GET /racks/."""

    row_id: UUID


# Shelves --------------------------------------------------------------------------------------


class ShelfCreate(ApiModel):
    """POST /shelves/."""

    rack_id: UUID
    name: str = Name
    level: Level
    plant_capacity: PlantCount = 0
    current_species: str | None = Species
    status: StructureStatus = "active"


class ShelfUpdate(_Update):
    """PUT /shelves/{shelf_id}: configuration and plant assignment.

    ``current_plant_count`` may not exceed ``plant_capacity`` (given or stored): the table's CHECK
    decides, so the rule holds whichever of the two a request changes.
    """

    name: str | None = Field(None, min_length=1, max_length=200)
    level: Level | None = None
    plant_capacity: PlantCount | None = None
    current_species: str | None = Species
    current_plant_count: PlantCount | None = None
    status: StructureStatus | None = None


class Shelf(Schema):
    """A shelf."""

    id: Uuid
    rack_id: Uuid
    name: str
    level: int
    plant_capacity: int
    current_species: str | None
    current_plant_count: int
    status: str
    created_at: Timestamp


class ShelfList(Schema):
    """GET /shelves/."""

    shelves: list[Shelf]
    total: int
    limit: int
    offset: int


class ShelfListQuery(PageQuery):
    """Query of GET /shelves/."""

    rack_id: UUID
