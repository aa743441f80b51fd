"""The refresh-token rotation decision, shared by agent and cloud (docs/design.md section 4).

Each refresh token is used once: using it replaces it with a successor. A second use of a token
means it leaked, so the whole session is revoked (OAuth 2.0 Security BCP, RFC 9700 section
4.14.2). The stores apply the decision inside one write transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Rotation", "RotationOutcome", "rotation_outcome"]

RotationOutcome = Literal["rotated", "reused", "invalid"]


@dataclass(frozen=True)
class Rotation:
    """The outcome of using a refresh token.

    ``rotated``: the token was current and is replaced; ``reused``: it had been used before, so
    the session is now revoked; ``invalid``: unknown, expired, or its session is over.
    """

    outcome: RotationOutcome
    session_id: str | None = None
    user_id: str | None = None


def rotation_outcome(*, used: bool, session_revoked: bool, expired: bool) -> RotationOutcome:
    """What using a known refresh token does; reuse wins even over a revoked session."""
    if used:
        return "reused"
    if session_revoked or expired:
        return "invalid"
    return "rotated"
