"""Who decides identity on this agent (issue 16; docs/architecture.md, "Identity").

Until the agent is paired, its identity is its own. Once paired, users, roles, permissions,
sessions, API keys and MFA of its farms belong to the cloud: the agent holds a replica that it
never sends back, and refuses with 409 MANAGED_BY_CLOUD a change that the cloud must make
(the next identity delta would overwrite it, and the cloud would never learn of it):

- creating a user, or granting or revoking a farm permission (grants on a paired farm);
- changing or deleting a cloud user, their role, profile, password or MFA;
- creating or revoking an API key of a cloud user.

The agent's own local accounts (the break-glass admin made from FARM_ADMIN_EMAIL, and accounts
made before pairing) stay local: they can still be changed here, and never go up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from protocol.errors import ManagedByCloud

__all__ = ["IdentityAuthority"]

CLOUD = "cloud"


class IdentityAuthority:
    """Refuses, on a paired agent, the identity changes that belong to the cloud."""

    def __init__(self, paired: Callable[[], bool]) -> None:
        self._paired = paired

    @property
    def paired(self) -> bool:
        """Whether the cloud is this agent's identity authority now."""
        return self._paired()

    def refuse_new(self, change: str) -> None:
        """New users and grants are made in the cloud once paired."""
        if self._paired():
            raise ManagedByCloud(details={"change": change})

    def refuse_for(self, user: sqlite3.Row | None, change: str) -> None:
        """A change concerning a cloud user is made in the cloud (paired or not: a cloud user
        exists here only as the replica of one)."""
        if user is not None and user["origin"] == CLOUD:
            raise ManagedByCloud(details={"change": change, "user_id": user["id"]})

    def manages(self, user: sqlite3.Row) -> bool:
        """Whether ``user``'s password and MFA are set here: not for a cloud user's replica."""
        return bool(user["origin"] != CLOUD)
