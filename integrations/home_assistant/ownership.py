"""Which farm each hub entity belongs to, and who may read or control it.

The hub serves a building, not one farm: an entity belongs to the farm an admin assigned it to,
else to the farm its hub area is mapped to (the entity's own area, else its device's, from the
hub's registries), else to none. Reads show an entity to admins and to callers who may read its
farm; control needs control of its farm (``protocol.access``: role and read_write). An entity of
no farm is an admin's alone. Written once for the agent and the cloud: each side hands over an
:class:`AssignmentStore` (SQLite, PostgreSQL) and how it finds a caller's grant on a farm.

While the hub's registries are unknown (its event stream has not been up since start), no entity
is in an area: only explicit assignments give non-admins anything, never more.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from protocol.access import Action, authorize
from protocol.errors import NotFound
from protocol.identity import PermissionType, Principal

__all__ = [
    "AREA_TABLE",
    "ENTITY_TABLE",
    "AssignmentStore",
    "AssignmentTables",
    "EntityAccess",
    "FarmGrant",
    "HubAssignments",
]

FarmGrant = Callable[[Principal, str], Awaitable[PermissionType | None]]
"""The caller's grant on a farm; ``None`` when it is absent or invisible to them."""


@dataclass(frozen=True)
class HubAssignments:
    """Area id -> farm id, and entity id -> farm id (an entity's own wins)."""

    areas: Mapping[str, str] = field(default_factory=dict)
    entities: Mapping[str, str] = field(default_factory=dict)

    def farm_of(self, entity_id: str, area_id: str | None) -> str | None:
        """The farm ``entity_id`` (in ``area_id``) belongs to, or ``None``."""
        farm = self.entities.get(entity_id)
        if farm is None and area_id is not None:
            farm = self.areas.get(area_id)
        return farm


class AssignmentStore(Protocol):
    """Where a side keeps the area mappings and entity assignments (admins change them)."""

    async def assignments(self) -> HubAssignments:
        """Every mapping and assignment."""
        ...

    async def set_area(self, area_id: str, farm_id: str, by: Principal) -> None:
        """Map a hub area to a farm; ``NotFound`` if there is no such farm."""
        ...

    async def clear_area(self, area_id: str) -> bool:
        """Unmap an area; ``False`` if it was not mapped."""
        ...

    async def set_entity(self, entity_id: str, farm_id: str, by: Principal) -> None:
        """Assign an entity to a farm; ``NotFound`` if there is no such farm."""
        ...

    async def clear_entity(self, entity_id: str) -> bool:
        """Remove an entity's assignment; ``False`` if it had none."""
        ...


#: The table and key column of area mappings and of entity assignments, on both sides.
AREA_TABLE = ("hub_area_farms", "area_id")
ENTITY_TABLE = ("hub_entity_farms", "entity_id")


class AssignmentTables(ABC):
    """The admin changes of an :class:`AssignmentStore`, over its two tables; each side writes
    one row (``_set``) and deletes one (``_clear``) in its database."""

    async def set_area(self, area_id: str, farm_id: str, by: Principal) -> None:
        """Map an area to a farm."""
        await self._set(AREA_TABLE, area_id, farm_id, by)

    async def clear_area(self, area_id: str) -> bool:
        """Unmap an area."""
        return await self._clear(AREA_TABLE, area_id)

    async def set_entity(self, entity_id: str, farm_id: str, by: Principal) -> None:
        """Assign an entity to a farm."""
        await self._set(ENTITY_TABLE, entity_id, farm_id, by)

    async def clear_entity(self, entity_id: str) -> bool:
        """Remove an entity's assignment."""
        return await self._clear(ENTITY_TABLE, entity_id)

    @abstractmethod
    async def _set(self, kind: tuple[str, str], key: str, farm_id: str, by: Principal) -> None:
        """Map ``key`` of the table ``kind`` to ``farm_id`` (NotFound for an unknown farm)."""

    @abstractmethod
    async def _clear(self, kind: tuple[str, str], key: str) -> bool:
        """Remove ``key``'s row of the table ``kind``; whether there was one."""


class EntityAccess:
    """The rule, over one request's view of the assignments and the caller's grants."""

    def __init__(self, principal: Principal, assignments: HubAssignments, grant: FarmGrant) -> None:
        self.principal = principal
        self.assignments = assignments
        self._grant = grant
        self._grants: dict[str, PermissionType | None] = {}

    async def grant_on(self, farm_id: str) -> PermissionType | None:
        """The caller's grant on a farm (asked once per request and farm)."""
        if farm_id not in self._grants:
            self._grants[farm_id] = await self._grant(self.principal, farm_id)
        return self._grants[farm_id]

    async def may_read(self, farm_id: str | None) -> bool:
        """Whether the caller sees an entity of ``farm_id`` (``None``: of no farm)."""
        if self.principal.is_admin:
            return True
        if farm_id is None:
            return False
        try:
            authorize(self.principal, Action.READ, await self.grant_on(farm_id))
        except NotFound:
            return False
        return True

    async def authorize_control(self, entity_id: str, farm_id: str | None) -> None:
        """Allow control of an entity of ``farm_id``, else 404 (an entity of a farm the caller
        does not see, or of no farm, does not exist for them) or 403 (role, read-only grant)."""
        if farm_id is None:
            if not self.principal.is_admin:
                raise NotFound("No such hub entity among the farms you may see")
            return
        try:
            authorize(self.principal, Action.CONTROL, await self.grant_on(farm_id))
        except NotFound:
            raise NotFound("No such hub entity among the farms you may see") from None
