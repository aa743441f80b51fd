"""Crops, grow plans and their progress (docs/design.md section 12).

A plan's life: ``planned`` -> ``active`` -> ``harvested``, and ``planned`` or ``active`` ->
``cancelled``. Harvested and cancelled are final.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, Strict, computed_field, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid

__all__ = [
    "TRANSITIONS",
    "Adherence",
    "Band",
    "Crop",
    "CropList",
    "GrowPlan",
    "GrowPlanCreate",
    "GrowPlanList",
    "GrowPlanListQuery",
    "GrowPlanProgress",
    "GrowPlanShelf",
    "GrowPlanStatus",
    "GrowPlanUpdate",
    "HarvestUnit",
    "MetricAdherence",
    "Stage",
    "StageProgress",
]

GrowPlanStatus = Literal["planned", "active", "harvested", "cancelled"]
HarvestUnit = Literal["g", "kg", "lb", "oz", "each", "bunch"]
"""The unit of a harvested quantity (the shop's inventory maps it to a catalog item)."""

TRANSITIONS: dict[str, frozenset[str]] = {
    "planned": frozenset({"active", "cancelled"}),
    "active": frozenset({"harvested", "cancelled"}),
    "harvested": frozenset(),
    "cancelled": frozenset(),
}
"""The status changes a PUT may make; any other is a 409 (the plan's state forbids it)."""

SpeciesKey = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
"""Same form as a shelf's ``current_species``, which a running plan sets."""
PlantCount = Annotated[int, Strict(), Field(ge=1, le=1_000_000)]


class Band(ApiModel):
    """A climate target and the allowed deviation either side of it."""

    target: float = Field(allow_inf_nan=False, ge=-50, le=100)
    band: float = Field(allow_inf_nan=False, gt=0, le=50)

    def holds(self, value: float) -> bool:
        """Whether ``value`` lies inside ``target +- band``."""
        return abs(value - self.target) <= self.band


class Stage(ApiModel):
    """One growth stage: its length, climate targets and lighting."""

    name: str = Field(min_length=1, max_length=64)
    days: int = Field(ge=1, le=365)
    temperature: Band
    """Air temperature in degrees Celsius."""
    humidity: Band
    """Relative humidity in percent."""
    light_hours: float = Field(ge=0, le=24)
    """Photoperiod: hours of light a day."""
    ppfd: float = Field(ge=0, le=2500)
    """Photosynthetic photon flux density at the canopy, umol/m2/s."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def dli(self) -> float:
        """Daily light integral, mol/m2/day: PPFD x photoperiod in seconds / 10^6."""
        return round(self.ppfd * self.light_hours * 3600 / 1_000_000, 2)


class Crop(Schema):
    """A catalogue entry: default stages of a species."""

    key: str
    name: str
    category: str
    source: str
    """Where the default numbers come from."""
    total_days: int
    stages: list[Stage]


class CropList(Schema):
    """GET /api/v1/crops."""

    crops: list[Crop]
    total: int
    limit: int
    offset: int


# Plans ----------------------------------------------------------------------------------------


class _ShelvesRule(ApiModel):
    @model_validator(mode="after")
    def _unique_shelves(self) -> _ShelvesRule:
        shelves = getattr(self, "shelf_ids", None)
        if shelves is not None and len(set(shelves)) != len(shelves):
            raise ValueError("shelf_ids: each shelf may be named once")
        return self


class GrowPlanCreate(_ShelvesRule):
    """POST /api/v1/grow-plans.

    ``stages`` default to the catalogue's for a catalogue species and are required otherwise.
    ``plant_count`` is shared among the shelves in proportion to their plant capacity.
    """

    farm_id: UUID
    shelf_ids: list[UUID] = Field(min_length=1, max_length=100)
    species: SpeciesKey
    species_name: str | None = Field(None, min_length=1, max_length=200)
    plant_count: PlantCount
    start_date: date | None = None
    """Defaults to today (UTC)."""
    stages: list[Stage] | None = Field(None, min_length=1, max_length=20)
    status: Literal["planned", "active"] = "planned"
    notes: str = Field("", max_length=2000)


class GrowPlanUpdate(_ShelvesRule):
    """PUT /api/v1/grow-plans/{plan_id}: the fields given replace the stored ones.

    Only ``status`` and ``notes`` may change once a plan has left ``planned``.
    """

    shelf_ids: list[UUID] | None = Field(None, min_length=1, max_length=100)
    species: SpeciesKey | None = None
    species_name: str | None = Field(None, min_length=1, max_length=200)
    plant_count: PlantCount | None = None
    start_date: date | None = None
    stages: list[Stage] | None = Field(None, min_length=1, max_length=20)
    status: GrowPlanStatus | None = None
    notes: str | None = Field(None, max_length=2000)
    harvested_quantity: float | None = Field(None, gt=0, le=1_000_000_000, allow_inf_nan=False)
    """With ``harvest_unit``, only as the plan becomes ``harvested``: how much was harvested."""
    harvest_unit: HarvestUnit | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> GrowPlanUpdate:
        if not self.model_fields_set:
            raise ValueError("at least one field must be given")
        harvest = {"harvested_quantity", "harvest_unit"} & self.model_fields_set
        if harvest and len(harvest) != 2:
            raise ValueError("harvested_quantity and harvest_unit go together")
        if harvest and self.status != "harvested":
            raise ValueError("harvested_quantity is given with status harvested")
        for name in self.model_fields_set:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: may not be null")
        return self


class GrowPlanShelf(Schema):
    """A shelf of a plan and the plants it holds."""

    shelf_id: Uuid
    plant_count: int


class GrowPlan(Schema):
    """A grow plan as stored."""

    id: Uuid
    farm_id: Uuid
    species: str
    species_name: str
    custom: bool
    """True when the species is not in the catalogue or its stages were given."""
    plant_count: int
    shelves: list[GrowPlanShelf]
    start_date: date
    expected_harvest_date: date
    """The plan's last day: start date + total_days - 1."""
    total_days: int
    stages: list[Stage]
    status: GrowPlanStatus
    notes: str
    created_by: str | None
    started_at: Timestamp | None
    ended_at: Timestamp | None
    harvest_notified_at: Timestamp | None
    harvested_quantity: float | None = None
    harvest_unit: HarvestUnit | None = None
    created_at: Timestamp
    updated_at: Timestamp


class GrowPlanList(Schema):
    """GET /api/v1/grow-plans."""

    grow_plans: list[GrowPlan]
    total: int
    limit: int
    offset: int


class GrowPlanListQuery(PageQuery):
    """Filters of the plan list; every filter given must match."""

    farm_id: UUID | None = None
    shelf_id: UUID | None = None
    status: GrowPlanStatus | None = None


# Progress -------------------------------------------------------------------------------------


class MetricAdherence(Schema):
    """How well one climate metric kept inside a stage's band so far."""

    metric: str
    target: float
    band: float
    in_band: float | None
    """Share (0..1) of the covered time the farm's mean was inside the band; null: no data."""
    coverage: float
    """Share (0..1) of the stage's elapsed time with readings."""
    resolution: str | None
    """Where the points came from (raw, 1m, 1h) and ``slot_s`` their time slot."""
    slot_s: int | None


class Adherence(Schema):
    """Climate adherence of a stage."""

    temperature: MetricAdherence
    humidity: MetricAdherence


class StageProgress(Schema):
    """A stage's place in the plan and, once begun, its adherence."""

    index: int
    name: str
    days: int
    start_date: date
    end_date: date
    """The stage's last day."""
    state: Literal["done", "current", "upcoming"]
    adherence: Adherence | None


class GrowPlanProgress(Schema):
    """GET /api/v1/grow-plans/{plan_id}/progress."""

    plan_id: Uuid
    farm_id: Uuid
    status: GrowPlanStatus
    as_of: Timestamp
    """The moment measured: now, or when the plan was harvested or cancelled."""
    day: int
    """Day of the plan, 1 on the start date; 0 before it."""
    total_days: int
    percent: float
    current_stage: str | None
    current_stage_index: int | None
    stage_day: int | None
    """Day within the current stage, from 1."""
    days_to_harvest: int
    expected_harvest_date: date
    harvest_ready: bool
    stages: list[StageProgress]
