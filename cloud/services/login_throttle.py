"""Throttling of repeated login failures per account and per address (docs/design.md section 4).

Failures are counted from the authentication event log (protocol/login_throttle.py holds the rule
the agent applies too), so the count survives a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from cloud.services.sessions import AuthEventRecorder
from cloud.store import identity as store
from cloud.store.db import Database
from cloud.store.origin import Client
from protocol.errors import RateLimited
from protocol.login_throttle import FAILURE_KINDS, RESET_KIND, ThrottlePolicy, throttle_wait_s

__all__ = ["LoginThrottle"]


class LoginThrottle:
    """Refuses login attempts with 429 after too many recent failures (counted from the log)."""

    def __init__(
        self,
        db: Database,
        events: AuthEventRecorder,
        policy: ThrottlePolicy,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._db = db
        self._events = events
        self._policy = policy
        self._now = now

    async def check(self, email: str, client: Client) -> None:
        """Raise :class:`RateLimited` (with the seconds to wait) if this attempt is throttled;
        the refusal is recorded as a ``login_throttled`` event."""
        now = self._now()
        since = self._policy.since(now)
        async with self._db.as_system() as conn:
            by_account = await store.nth_recent_failure(
                conn,
                email=email,
                ip=client.ip,
                kinds=FAILURE_KINDS,
                since=since,
                n=self._policy.per_account,
                reset_kind=RESET_KIND,
            )
            by_address = None
            if client.ip is not None:
                by_address = await store.nth_recent_failure(
                    conn,
                    email=None,
                    ip=client.ip,
                    kinds=FAILURE_KINDS,
                    since=since,
                    n=self._policy.per_address,
                    reset_kind=None,
                )
        wait = throttle_wait_s(by_account, by_address, self._policy, now)
        if wait is not None:
            await self._events.record("login_throttled", email=email, address=client.ip)
            raise RateLimited(wait, "Too many failed logins; try again later")
