"""Where a request came from, as the cloud keeps it with a session and in the authentication
log."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Client"]


@dataclass(frozen=True)
class Client:
    """A request's address (when it is an IP address) and user agent."""

    ip: str | None
    user_agent: str | None
