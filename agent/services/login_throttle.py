"""Throttling of repeated login failures per account and per address (DESIGN.md section 4).

Failures are counted from the authentication event log, so the count survives a restart and no
second bookkeeping can drift from it. An account's count starts again after a successful login;
an address's does not (an attacker could log into their own account to reset it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent.services.auth_events import AuthEvents
from agent.store.auth_events import AuthEventStore
from protocol.errors import RateLimited
from protocol.timefmt import iso, parse_iso, utcnow

__all__ = ["FAILURE_KINDS", "LoginThrottle", "ThrottlePolicy"]

FAILURE_KINDS = ("login_failed", "mfa_failed")
"""Event kinds that count as a failed attempt; throttled attempts themselves do not."""


@dataclass(frozen=True)
class ThrottlePolicy:
    """At most ``per_account`` / ``per_address`` failures within ``window_s``."""

    per_account: int
    per_address: int
    window_s: int


class LoginThrottle:
    """Refuses login attempts with 429 after too many recent failures."""

    def __init__(
        self,
        events: AuthEventStore,
        recorder: AuthEvents,
        policy: ThrottlePolicy,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._events = events
        self._recorder = recorder
        self._policy = policy
        self._now = now

    async def check(self, email: str, address: str | None) -> None:
        """Raise :class:`RateLimited` (with the seconds to wait) if this attempt is throttled;
        the refusal is recorded as a ``login_throttled`` event."""
        wait = await self._wait_s(email, address)
        if wait is not None:
            await self._recorder.record("login_throttled", email=email, address=address)
            raise RateLimited(wait, "Too many failed logins; try again later")

    async def _wait_s(self, email: str, address: str | None) -> int | None:
        now = self._now()
        window = timedelta(seconds=self._policy.window_s)
        since = iso(now - window)
        # Once the n-th most recent failure leaves the window, fewer than n remain in it.
        oldest = await self._events.nth_recent_by_email(
            email, FAILURE_KINDS, since, self._policy.per_account, reset_kind="login_ok"
        )
        if address is not None:
            by_address = await self._events.nth_recent_by_address(
                address, FAILURE_KINDS, since, self._policy.per_address
            )
            if by_address is not None and (oldest is None or by_address > oldest):
                oldest = by_address
        if oldest is None:
            return None
        return max(1, math.ceil((parse_iso(oldest) + window - now).total_seconds()))
