"""Who may use the POS integration: those who run the farm's business."""

from __future__ import annotations

from protocol.errors import Forbidden
from protocol.identity import Principal, Role

__all__ = ["require_pos_role"]

_ROLES = frozenset({Role.ADMIN, Role.FARM_MANAGER})


def require_pos_role(principal: Principal) -> None:
    """403 unless the caller is an admin or a farm manager."""
    if principal.role not in _ROLES:
        raise Forbidden("Only administrators and farm managers use the POS integration")
