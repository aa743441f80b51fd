"""Rules of user management that hold whatever stores the users (docs/design.md
sections 4, 12): the grant ``farms_access`` gives, the last-admin guard, API key spelling."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.identity import PermissionType, Role
from protocol.schemas.users import FarmGrant

__all__ = [
    "API_KEY_PREFIX",
    "api_key_display_prefix",
    "default_grant",
    "ends_an_admin",
    "farms_access_grants",
    "grant_pairs",
]

API_KEY_PREFIX = "fk_"
"""Marks farm API keys, so secret scanners and people can tell them from other tokens."""
_SHOWN_CHARS = 8

_WRITERS = frozenset({Role.ADMIN, Role.FARM_MANAGER, Role.OPERATOR})


def default_grant(role: Role) -> PermissionType:
    """The grant ``farms_access`` gives: write for roles that may write, else read-only."""
    return PermissionType.READ_WRITE if role in _WRITERS else PermissionType.READ_ONLY


def farms_access_grants(farm_ids: Sequence[str], role: Role) -> list[tuple[str, str]]:
    """(farm, grant) pairs a ``farms_access`` list stands for: each farm once, with the role's
    default grant."""
    grant = default_grant(role).value
    return [(farm_id, grant) for farm_id in dict.fromkeys(farm_ids)]


def grant_pairs(grants: Sequence[FarmGrant]) -> list[tuple[str, str]]:
    """(farm, grant) pairs of an explicit grant list; a farm named twice keeps its last grant."""
    pairs = {grant.farm_id: grant.permission_type.value for grant in grants}
    return list(pairs.items())


def ends_an_admin(
    old_role: str, old_status: str, new_role: str | None, new_status: str | None
) -> bool:
    """Whether a change (``None``: unchanged) takes an active admin out of that state; the
    last active admin must not be (nobody could fix it)."""
    was_admin = old_role == Role.ADMIN.value and old_status == "active"
    stays = new_role in (None, Role.ADMIN.value) and new_status in (None, "active")
    return was_admin and not stays


def api_key_display_prefix(key: str) -> str:
    """The part of a key kept in clear, to tell keys apart in listings."""
    return key[: len(API_KEY_PREFIX) + _SHOWN_CHARS]
