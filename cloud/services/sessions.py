"""The authentication log as the cloud's services write it, and where a request came from.

Sessions themselves (opening, refresh-token rotation, logout) are the shared flows of
protocol/identity_flows/sessions.py over cloud/store/identity_flows.py. A session is what an
access token's ``sid`` names; the request path checks it in PostgreSQL, so revoking it refuses
its access tokens at once. Revoked sessions reach agents with the identity delta of the next sync
(cloud/services/sync_delta.py).
"""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from cloud.store.origin import Client

__all__ = ["AuthEventRecorder", "Client"]


class AuthEventRecorder(Protocol):
    """Appends to the authentication log (cloud/services/auth_events.py implements it)."""

    async def record(
        self,
        kind: str,
        *,
        user_id: UUID | None = None,
        email: str | None = None,
        address: str | None = None,
        **detail: Any,
    ) -> None:
        """Append one event; secrets never go in ``detail``."""
        ...
