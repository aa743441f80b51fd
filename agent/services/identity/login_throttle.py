"""Throttling of repeated login failures (protocol/login_throttle.py has the rules).

Failures are counted from the authentication event log, so the count survives a restart and no
second bookkeeping can drift from it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from agent.services.identity.auth_events import AuthEvents
from agent.store.auth_events import AuthEventStore
from protocol.errors import RateLimited
from protocol.login_throttle import FAILURE_KINDS, RESET_KIND, ThrottlePolicy, throttle_wait_s
from protocol.timefmt import iso, parse_iso, utcnow

__all__ = ["FAILURE_KINDS", "LoginThrottle", "ThrottlePolicy"]


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
        since = iso(self._policy.since(now))
        by_account = await self._events.nth_recent_by_email(
            email, address, FAILURE_KINDS, since, self._policy.per_account, reset_kind=RESET_KIND
        )
        by_address = None
        if address is not None:
            by_address = await self._events.nth_recent_by_address(
                address, FAILURE_KINDS, since, self._policy.per_address
            )
        return throttle_wait_s(
            parse_iso(by_account) if by_account is not None else None,
            parse_iso(by_address) if by_address is not None else None,
            self._policy,
            now,
        )
