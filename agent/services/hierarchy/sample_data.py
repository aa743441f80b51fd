"""A sample farm for demonstrations: one farm, two rows, racks and shelves with crops on them.

Created through the same services as the API, so it obeys every rule a user's farm does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from uuid import UUID

from agent.services.hierarchy.farms import FarmService
from agent.services.hierarchy.levels import HierarchyService
from protocol.identity import Principal
from protocol.schemas.farms import (
    FarmCreate,
    FarmListQuery,
    RackCreate,
    RowCreate,
    ShelfCreate,
    ShelfUpdate,
)

__all__ = ["SampleFarm", "create_sample_farm"]

log = logging.getLogger(__name__)

# (row name, [(rack name, [(shelf name, species, plants), ...]), ...])
_LAYOUT = (
    (
        "Row A: leafy greens",
        (
            (
                "Rack A1",
                (("A1 top", "lettuce", 36), ("A1 middle", "lettuce", 36), ("A1 low", "kale", 24)),
            ),
            (
                "Rack A2",
                (("A2 top", "basil", 30), ("A2 middle", "arugula", 40), ("A2 low", None, 0)),
            ),
        ),
    ),
    (
        "Row B: herbs and fruit",
        (("Rack B1", (("B1 top", "microgreens", 120), ("B1 low", "strawberries", 16))),),
    ),
)


@dataclass(frozen=True)
class SampleFarm:
    """What was created: the farm and its shelves, for devices placed on them later."""

    farm_id: str
    shelf_ids: tuple[str, ...]


async def create_sample_farm(
    farms: FarmService, hierarchy: HierarchyService, owner: Principal
) -> SampleFarm | None:
    """Create the sample farm owned by ``owner`` when no farm exists yet; else ``None``."""
    existing = await farms.list(owner, FarmListQuery(limit=1))
    if existing.total > 0:
        return None
    farm = await farms.create(
        owner,
        FarmCreate(
            name="Greenhouse One",
            description="Sample vertical farm created by --sample-data",
            location="Building 2, ground floor",
        ),
    )
    shelves: list[str] = []
    for row_position, (row_name, racks) in enumerate(_LAYOUT, start=1):
        row = await hierarchy.create_row(
            owner, RowCreate(farm_id=UUID(farm.id), name=row_name, position=row_position)
        )
        for rack_position, (rack_name, rack_shelves) in enumerate(racks, start=1):
            rack = await hierarchy.create_rack(
                owner,
                RackCreate(
                    row_id=UUID(row.id),
                    name=rack_name,
                    position=rack_position,
                    height_cm=240,
                    width_cm=120,
                    depth_cm=60,
                ),
            )
            # Listed top first; levels count from 0 at the bottom (protocol/schemas/farms.py).
            top = len(rack_shelves) - 1
            for index, (shelf_name, species, plants) in enumerate(rack_shelves):
                level = top - index
                shelf = await hierarchy.create_shelf(
                    owner,
                    ShelfCreate(
                        rack_id=UUID(rack.id),
                        name=shelf_name,
                        level=level,
                        plant_capacity=max(plants, 24),
                        current_species=species,
                    ),
                )
                if plants:
                    await hierarchy.update_shelf(
                        owner, shelf.id, ShelfUpdate(current_plant_count=plants)
                    )
                shelves.append(shelf.id)
    log.info("created the sample farm %s with %d shelves", farm.id, len(shelves))
    return SampleFarm(farm_id=farm.id, shelf_ids=tuple(shelves))
