"""What a stream client may see: the farms visible to it, and its grant on one farm.

Each service answers these by its own one visibility rule (the agent's store, the cloud's
row-level security); the connection only asks, at connect time and every ``recheck_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from protocol.identity import PermissionType, Principal

__all__ = ["NOTHING", "FarmVisibility", "StreamScope"]


@dataclass(frozen=True, slots=True)
class FarmVisibility:
    """The farms a caller may see at one moment: every farm, or those in ``farm_ids``."""

    everything: bool
    farm_ids: frozenset[str] = frozenset()

    def allows(self, farm_id: str) -> bool:
        """Whether ``farm_id`` is visible."""
        return self.everything or farm_id in self.farm_ids


NOTHING = FarmVisibility(everything=False)


class StreamScope(Protocol):
    """The visibility rule of the service serving the streams."""

    async def visibility(self, principal: Principal) -> FarmVisibility:
        """The farms ``principal`` may see now."""
        ...

    async def grant(self, principal: Principal, farm_id: str) -> PermissionType | None:
        """The caller's grant on a farm, or None if it is not visible (or not a farm id)."""
        ...
