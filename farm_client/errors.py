"""The client's exceptions, all under :class:`FarmClientError`.

FarmClientError
+-- FarmApiError          the server answered with an error envelope (docs/design.md section 3)
|   +-- MfaRequired       login needs a TOTP code (``challenge`` for /auth/mfa/verify)
+-- FarmConnectionError   no answer: refused, reset, timed out
+-- StreamClosedError     a stream ended for good (4401, 4403, or retries exhausted)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FarmApiError",
    "FarmClientError",
    "FarmConnectionError",
    "MfaRequired",
    "StreamClosedError",
]


class FarmClientError(Exception):
    """Base of every error the client raises."""


class FarmApiError(FarmClientError):
    """An error answer: HTTP ``status`` and the envelope's ``code``, ``message``, ``details``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.request_id = request_id


class MfaRequired(FarmApiError):
    """The account has MFA on: exchange ``challenge`` and a TOTP code at /auth/mfa/verify."""

    def __init__(self, challenge: str, expires_in: int) -> None:
        super().__init__(401, "MFA_REQUIRED", "login needs a TOTP code")
        self.challenge = challenge
        self.expires_in = expires_in


class FarmConnectionError(FarmClientError):
    """The server could not be reached or did not answer in time."""


class StreamClosedError(FarmClientError):
    """A stream closed and will not be reopened; ``code`` is the WebSocket close code."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"stream closed: {code} {reason}".rstrip())
        self.code = code
        self.reason = reason
