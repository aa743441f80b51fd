"""What each role may do (docs/design.md 4): role caps the action, permission selects the farm.

Agent and cloud decide visibility their own way (store layer / PostgreSQL RLS); both apply the same
role caps from here, so a role means the same thing on both sides.
"""

from __future__ import annotations

from enum import StrEnum

from protocol.errors import Forbidden, NotFound
from protocol.identity import PermissionType, Principal, Role

__all__ = ["Action", "authorize", "require_role"]


class Action(StrEnum):
    """Kinds of operation on a farm and what is below it."""

    READ = "read"
    METRICS = "metrics"
    CONTROL = "control"
    MANAGE = "manage"


_ALLOWED: dict[Role, frozenset[Action]] = {
    Role.ADMIN: frozenset(Action),
    Role.FARM_MANAGER: frozenset(Action),
    Role.OPERATOR: frozenset({Action.READ, Action.METRICS, Action.CONTROL}),
    Role.ANALYST: frozenset({Action.READ, Action.METRICS}),
    Role.USER: frozenset({Action.READ}),
}
_NEEDS_WRITE = frozenset({Action.CONTROL, Action.MANAGE})


def authorize(principal: Principal, action: Action, grant: PermissionType | None) -> None:
    """Allow ``action`` on a farm the caller holds ``grant`` on, else raise 404 or 403.

    ``grant`` is ``None`` when the farm does not exist or the caller may not see it: both are a
    404, so a farm's existence is not disclosed.
    """
    if grant is None:
        raise NotFound("Farm not found")
    if action not in _ALLOWED[principal.role]:
        raise Forbidden(f"Role {principal.role} may not {action} on farms")
    if action in _NEEDS_WRITE and grant is not PermissionType.READ_WRITE:
        raise Forbidden("Read-only access to this farm")


def require_role(principal: Principal, *roles: Role) -> None:
    """Raise 403 unless the caller holds one of ``roles``."""
    if principal.role not in roles:
        raise Forbidden("This operation needs role " + " or ".join(roles))
