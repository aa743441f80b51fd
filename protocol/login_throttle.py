"""Throttling of repeated login failures, the decision shared by agent and cloud.

Failures are counted from the authentication event log (docs/design.md section 4): at most
``per_account`` failures of one account *from one address*, and ``per_address`` failures from
one address (over every account), within ``window_s``. Counting an account's failures per
address means a stranger who knows someone's email throttles only themselves: the owner, from
their own address, still logs in. The pair's count starts again after a successful login from
it; an address's does not (an attacker could log into their own account to reset it). The
stores answer one question: when was the n-th most recent failure in the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["FAILURE_KINDS", "RESET_KIND", "ThrottlePolicy", "throttle_wait_s"]

FAILURE_KINDS = ("login_failed", "mfa_failed")
"""Event kinds that count as a failed attempt; throttled attempts themselves do not."""

RESET_KIND = "login_ok"
"""The event kind after which an account's failures no longer count."""


@dataclass(frozen=True)
class ThrottlePolicy:
    """At most ``per_account`` / ``per_address`` failures within ``window_s``."""

    per_account: int
    per_address: int
    window_s: int

    def since(self, now: datetime) -> datetime:
        """The start of the window ending at ``now``."""
        return now - timedelta(seconds=self.window_s)


def throttle_wait_s(
    nth_by_account: datetime | None,
    nth_by_address: datetime | None,
    policy: ThrottlePolicy,
    now: datetime,
) -> int | None:
    """Seconds until an attempt is allowed again, or ``None`` if it is allowed now.

    Each argument is the time of the n-th most recent failure within the window (n being the
    limit), or ``None`` if there are fewer; once it leaves the window, fewer than n remain.
    """
    candidates = [t for t in (nth_by_account, nth_by_address) if t is not None]
    if not candidates:
        return None
    window = timedelta(seconds=policy.window_s)
    return max(1, math.ceil((max(candidates) + window - now).total_seconds()))
