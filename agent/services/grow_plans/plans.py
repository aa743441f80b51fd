"""Grow plan use cases: list, create, update with status transitions, progress, the crop list.

Who may do what: reading plans and their progress needs read on the farm; creating and changing
plans needs ``control`` (operators run the crop cycle; it is no structural edit of the farm).
A plan that becomes active puts its species and plant counts on its shelves; one harvested or
cancelled clears them; each in the transaction that changes the plan.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, tzinfo
from typing import Any

from agent.services.grow_plans.crop_catalogue import CropCatalogue
from agent.services.grow_plans.progress import GrowProgress, PlanTimeline, harvest_date
from agent.store.access import farm_grant
from agent.store.db import Database
from agent.store.grow_plans import GrowPlanStore, PlanFilter, ShelfOccupation, ShelfShare
from protocol.access import Action, authorize
from protocol.errors import Conflict, NotFound, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.common import PageQuery
from protocol.schemas.grow_plans import (
    TRANSITIONS,
    CropList,
    GrowPlan,
    GrowPlanCreate,
    GrowPlanList,
    GrowPlanListQuery,
    GrowPlanProgress,
    GrowPlanShelf,
    GrowPlanUpdate,
    Stage,
)
from protocol.timefmt import iso, parse_iso

__all__ = ["GrowPlanService", "share_plants"]

_EDITABLE_AFTER_START = frozenset({"status", "notes", "harvested_quantity", "harvest_unit"})


def share_plants(total: int, capacities: Sequence[int]) -> list[int]:
    """Split ``total`` plants across shelves in proportion to capacity (largest remainder).

    No share exceeds its shelf's capacity when ``total`` fits their sum.
    """
    room = sum(capacities)
    exact = [total * capacity / room for capacity in capacities]
    shares = [int(value) for value in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (shares[i] - exact[i], i))
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _stages_json(stages: Sequence[Stage]) -> str:
    return json.dumps([stage.model_dump(exclude={"dli"}) for stage in stages])


def _stages_of(row: sqlite3.Row) -> list[Stage]:
    return [Stage.model_validate(item) for item in json.loads(row["stages"])]


class GrowPlanService:
    """Grow plans as the caller may see and change them."""

    def __init__(
        self,
        db: Database,
        store: GrowPlanStore,
        catalogue: CropCatalogue,
        progress: GrowProgress,
        *,
        now: Callable[[], float],
        zone: tzinfo,
    ) -> None:
        self._db = db
        self._zone = zone
        self._store = store
        self._catalogue = catalogue
        self._progress = progress
        self._now = now

    def crops(self, query: PageQuery) -> CropList:
        """A page of the crop catalogue (any signed-in caller)."""
        return self._catalogue.page(query.limit, query.offset)

    async def find(self, principal: Principal, query: GrowPlanListQuery) -> GrowPlanList:
        """Visible plans, filtered by farm, shelf and status; an invisible farm is a 404."""
        if query.farm_id is not None:
            authorize(
                principal, Action.READ, await farm_grant(self._db, principal, str(query.farm_id))
            )
        where = PlanFilter(
            farm_id=None if query.farm_id is None else str(query.farm_id),
            shelf_id=None if query.shelf_id is None else str(query.shelf_id),
            status=query.status,
        )
        rows, total = await self._store.find(principal, where, query.limit, query.offset)
        shelves = await self._store.shelves_of([row["id"] for row in rows])
        plans = [self._model(row, shelves[row["id"]]) for row in rows]
        return GrowPlanList(grow_plans=plans, total=total, limit=query.limit, offset=query.offset)

    async def create(self, principal: Principal, body: GrowPlanCreate) -> GrowPlan:
        """Create a plan, planned or already active."""
        farm_id = str(body.farm_id)
        authorize(principal, Action.CONTROL, await farm_grant(self._db, principal, farm_id))
        stages, custom, name = self._stages(body.species, body.stages, body.species_name)
        shelf_ids = [str(shelf) for shelf in body.shelf_ids]
        shares = await self._shares(farm_id, shelf_ids, body.plant_count)
        now = self._moment()
        stamp = iso(now)
        active = body.status == "active"
        plan_id = str(uuid.uuid4())
        fields: dict[str, Any] = {
            "id": plan_id,
            "farm_id": farm_id,
            "species": body.species,
            "species_name": name,
            "custom": int(custom),
            "plant_count": body.plant_count,
            "start_date": (body.start_date or now.date()).isoformat(),
            "stages": _stages_json(stages),
            "total_days": sum(stage.days for stage in stages),
            "status": body.status,
            "notes": body.notes,
            "created_by": principal.user_id,
            "started_at": stamp if active else None,
            "created_at": stamp,
            "updated_at": stamp,
        }
        await self._store.create(fields, shares, occupy=active)
        return await self._get(plan_id)

    async def update(self, principal: Principal, plan_id: str, body: GrowPlanUpdate) -> GrowPlan:
        """Change fields of a planned plan, or move a plan along its life cycle."""
        row = await self._visible(principal, plan_id, Action.CONTROL)
        current = row["status"]
        given = body.model_dump(exclude_unset=True)
        target = given.pop("status", current)
        if target != current and target not in TRANSITIONS[current]:
            allowed = sorted(TRANSITIONS[current])
            raise Conflict(
                f"A {current} grow plan cannot become {target}",
                {"field": "status", "from": current, "to": target, "allowed": allowed},
            )
        if "harvested_quantity" in given and current != "active":
            raise Conflict(
                f"The harvest is recorded as an active plan becomes harvested, not a {current} one",
                {"field": "harvested_quantity", "status": current},
            )
        frozen = sorted(set(given) - _EDITABLE_AFTER_START)
        if current != "planned" and frozen:
            raise Conflict(
                f"Only status and notes of a {current} grow plan may change",
                {"fields": frozen},
            )
        now = self._moment()
        stamp = iso(now)
        changes: dict[str, Any] = {}
        species = given.get("species", row["species"])
        if "species" in given or "stages" in given:
            kept_name = None if "species" in given else row["species_name"]
            stages, custom, name = self._stages(
                species, body.stages, body.species_name, fallback=kept_name
            )
            changes |= {
                "species": species,
                "species_name": name,
                "custom": int(custom),
                "stages": _stages_json(stages),
                "total_days": sum(stage.days for stage in stages),
            }
        elif "species_name" in given:
            changes["species_name"] = given["species_name"]
        for name in ("plant_count", "notes", "harvested_quantity", "harvest_unit"):
            if name in given:
                changes[name] = given[name]
        if "start_date" in given:
            changes["start_date"] = given["start_date"].isoformat()
        shares: list[ShelfShare] | None = None
        if "shelf_ids" in given or "plant_count" in given:
            shelf_ids = (
                [str(shelf) for shelf in given["shelf_ids"]]
                if "shelf_ids" in given
                else [s.shelf_id for s in (await self._store.shelves_of([plan_id]))[plan_id]]
            )
            shares = await self._shares(
                row["farm_id"], shelf_ids, given.get("plant_count", row["plant_count"])
            )
        occupy = None
        if target != current:
            changes["status"] = target
            if target == "active":
                changes["started_at"] = stamp
                # Starting a plan later than planned starts its days from today.
                changes.setdefault("start_date", now.date().isoformat())
                occupy = ShelfOccupation(
                    species,
                    shares or (await self._store.shelves_of([plan_id]))[plan_id],
                )
            else:
                changes["ended_at"] = stamp
        changes["updated_at"] = stamp
        await self._store.update(
            plan_id,
            changes,
            shares=shares,
            occupy=occupy,
            release=current == "active" and target in ("harvested", "cancelled"),
            expected_status=current,
        )
        return await self._get(plan_id)

    async def progress(self, principal: Principal, plan_id: str) -> GrowPlanProgress:
        """Day, stage, harvest date and climate adherence of a plan."""
        row = await self._visible(principal, plan_id, Action.READ)
        timeline = PlanTimeline(
            plan_id=row["id"],
            farm_id=row["farm_id"],
            status=row["status"],
            start_date=date.fromisoformat(row["start_date"]),
            stages=_stages_of(row),
            ended_at=None if row["ended_at"] is None else parse_iso(row["ended_at"]),
        )
        return await self._progress.of(timeline, self._moment())

    def _moment(self) -> datetime:
        """Now, in the farm's time zone (so ``.date()`` is the farm's today)."""
        return datetime.fromtimestamp(self._now(), self._zone)

    async def _visible(self, principal: Principal, plan_id: str, action: Action) -> sqlite3.Row:
        """The plan, if the caller may see it (else 404) and do ``action`` on it (else 403)."""
        row = await self._store.get(plan_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Grow plan not found")
        authorize(principal, action, grant)
        return row

    def _stages(
        self,
        species: str,
        given: Sequence[Stage] | None,
        species_name: str | None,
        *,
        fallback: str | None = None,
    ) -> tuple[list[Stage], bool, str]:
        """The plan's stages, whether they are custom, and the species' display name."""
        crop = self._catalogue.get(species)
        name = species_name or (crop.name if crop is not None else fallback or species)
        if given:
            return list(given), True, name
        if crop is None:
            raise ValidationFailed.of(
                [("stages", f"required: {species!r} is not in the crop catalogue")]
            )
        return list(crop.stages), False, name

    async def _shares(
        self, farm_id: str, shelf_ids: Sequence[str], plant_count: int
    ) -> list[ShelfShare]:
        """Each shelf's share of the plants: 422 for a shelf off the farm or too little room."""
        shelves = await self._store.shelves(shelf_ids)
        for index, shelf_id in enumerate(shelf_ids):
            shelf = shelves.get(shelf_id)
            if shelf is None or shelf["farm_id"] != farm_id:
                raise ValidationFailed.of([(f"shelf_ids.{index}", "no such shelf on this farm")])
        capacities = [int(shelves[shelf_id]["plant_capacity"]) for shelf_id in shelf_ids]
        if plant_count > sum(capacities):
            raise ValidationFailed.of(
                [("plant_count", f"exceeds the shelves' plant capacity of {sum(capacities)}")]
            )
        counts = share_plants(plant_count, capacities)
        return [ShelfShare(s, n) for s, n in zip(shelf_ids, counts, strict=True)]

    async def _get(self, plan_id: str) -> GrowPlan:
        row = await self._store.get(plan_id)
        if row is None:  # deleted with its farm meanwhile
            raise NotFound("Grow plan not found")
        shelves = await self._store.shelves_of([plan_id])
        return self._model(row, shelves[plan_id])

    @staticmethod
    def _model(row: sqlite3.Row, shares: Sequence[ShelfShare]) -> GrowPlan:
        data: Mapping[str, Any] = dict(row)
        start = date.fromisoformat(row["start_date"])
        return GrowPlan(
            **{**data, "custom": bool(row["custom"]), "stages": _stages_of(row)},
            shelves=[GrowPlanShelf(shelf_id=s.shelf_id, plant_count=s.plant_count) for s in shares],
            expected_harvest_date=harvest_date(start, row["total_days"]),
        )
