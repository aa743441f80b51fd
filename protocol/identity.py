"""Who is calling: roles, plans and the authenticated principal (docs/design.md section 4)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["PermissionType", "Plan", "Principal", "Role"]


class Role(StrEnum):
    """What a user may do; per-farm permissions select where."""

    ADMIN = "admin"
    FARM_MANAGER = "farm_manager"
    OPERATOR = "operator"
    ANALYST = "analyst"
    USER = "user"


class Plan(StrEnum):
    """Rate-limit plan of a user; API keys inherit their user's plan."""

    STANDARD = "standard"
    PREMIUM = "premium"


class PermissionType(StrEnum):
    """A per-farm grant."""

    READ_WRITE = "read_write"
    READ_ONLY = "read_only"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller, by token (``session_id``) or by API key (``api_key_id``)."""

    user_id: str
    email: str
    role: Role
    plan: Plan = Plan.STANDARD
    session_id: str | None = None
    api_key_id: str | None = None

    @property
    def is_admin(self) -> bool:
        """Whether the caller holds the admin role."""
        return self.role is Role.ADMIN
