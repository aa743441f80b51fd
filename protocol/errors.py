"""The API's error tree and the one error envelope every layer answers with (docs/design.md 3).

ApiError                      status, code, message, details
├── BadRequest                400 BAD_REQUEST
├── InvalidCredentials        400 INVALID_CREDENTIALS
├── Unauthorized              401 UNAUTHORIZED
├── TokenExpired              401 TOKEN_EXPIRED
├── Forbidden                 403 FORBIDDEN
│   └── EmailNotVerified      403 EMAIL_NOT_VERIFIED (sign-in before the address is verified)
├── NotFound                  404 RESOURCE_NOT_FOUND
├── MethodNotAllowed          405 METHOD_NOT_ALLOWED
├── Conflict                  409 RESOURCE_EXISTS
│   └── ManagedByCloud        409 MANAGED_BY_CLOUD (a paired agent's identity is the cloud's)
├── PayloadTooLarge           413 PAYLOAD_TOO_LARGE
├── ValidationFailed          422 VALIDATION_ERROR
├── RateLimited               429 RATE_LIMITED (carries retry_after)
├── InternalError             500 INTERNAL_ERROR
├── UpstreamError             502 UPSTREAM_ERROR
├── ServiceUnavailable        503 SERVICE_UNAVAILABLE
└── UpstreamTimeout           504 UPSTREAM_TIMEOUT
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from protocol.timefmt import now_iso

__all__ = [
    "ApiError",
    "BadRequest",
    "Conflict",
    "EmailNotVerified",
    "FieldIssue",
    "Forbidden",
    "InternalError",
    "InvalidCredentials",
    "ManagedByCloud",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "ServiceUnavailable",
    "TokenExpired",
    "Unauthorized",
    "UpstreamError",
    "UpstreamTimeout",
    "ValidationFailed",
    "envelope",
]

FieldIssue = tuple[str, str]


class ApiError(Exception):
    """An error the API reports to its caller in the error envelope."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "INTERNAL_ERROR"
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, details: Mapping[str, Any] | None = None):
        self.message = message or self.default_message
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(self.message)


class BadRequest(ApiError):
    """The request is malformed (bad JSON, wrong content type)."""

    status, code, default_message = 400, "BAD_REQUEST", "Bad request"


class InvalidCredentials(ApiError):
    """Login with a wrong email or password."""

    status, code, default_message = 400, "INVALID_CREDENTIALS", "Invalid email or password"


class Unauthorized(ApiError):
    """Missing or invalid authentication."""

    status, code, default_message = 401, "UNAUTHORIZED", "Authentication required"


class TokenExpired(ApiError):
    """The access token has expired."""

    status, code, default_message = 401, "TOKEN_EXPIRED", "Access token has expired"


class Forbidden(ApiError):
    """The caller is authenticated but may not do this."""

    status, code, default_message = 403, "FORBIDDEN", "Insufficient permissions"


class EmailNotVerified(Forbidden):
    """A sign-in with the right password, before the account's address is verified (mail is
    configured: the verification link is in the mail sent at registration)."""

    code = "EMAIL_NOT_VERIFIED"
    default_message = (
        "Verify your e-mail address first: follow the link in the mail sent when you registered"
    )


class NotFound(ApiError):
    """The resource does not exist or the caller may not see it."""

    status, code, default_message = 404, "RESOURCE_NOT_FOUND", "Resource not found"


class MethodNotAllowed(ApiError):
    """The path exists but not with this method."""

    status, code, default_message = 405, "METHOD_NOT_ALLOWED", "Method not allowed"


class Conflict(ApiError):
    """The resource already exists."""

    status, code, default_message = 409, "RESOURCE_EXISTS", "Resource already exists"


class ManagedByCloud(Conflict):
    """A change a paired agent leaves to the cloud, its identity authority (issue 16)."""

    code = "MANAGED_BY_CLOUD"
    default_message = (
        "This agent is paired with a cloud, which manages its users, roles, permissions and "
        "API keys: make this change in the cloud"
    )


class PayloadTooLarge(ApiError):
    """The request body is over the size limit."""

    status, code, default_message = 413, "PAYLOAD_TOO_LARGE", "Request body too large"


class ValidationFailed(ApiError):
    """Input failed validation; ``details.errors`` lists field and issue."""

    status, code, default_message = 422, "VALIDATION_ERROR", "Invalid input data"

    @classmethod
    def of(cls, issues: Iterable[FieldIssue], message: str | None = None) -> ValidationFailed:
        """Build from ``(field, issue)`` pairs."""
        errors = [{"field": field, "issue": issue} for field, issue in issues]
        return cls(message, {"errors": errors})


class RateLimited(ApiError):
    """Too many requests; retry after ``retry_after`` seconds."""

    status, code, default_message = 429, "RATE_LIMITED", "Rate limit exceeded"

    def __init__(self, retry_after: int, message: str | None = None):
        super().__init__(message, {"retry_after": retry_after})
        self.retry_after = retry_after


class InternalError(ApiError):
    """An unexpected fault; details are logged, never sent."""


class UpstreamError(ApiError):
    """A service we depend on answered with an error."""

    status, code, default_message = 502, "UPSTREAM_ERROR", "Upstream service error"


class ServiceUnavailable(ApiError):
    """A dependency this request needs is down."""

    status, code, default_message = 503, "SERVICE_UNAVAILABLE", "Service unavailable"


class UpstreamTimeout(ApiError):
    """A service we depend on did not answer in time."""

    status, code, default_message = 504, "UPSTREAM_TIMEOUT", "Upstream service timed out"


def envelope(error: ApiError, request_id: str) -> dict[str, Any]:
    """Return the error body of docs/design.md section 3."""
    return {
        "success": False,
        "error": {"code": error.code, "message": error.message, "details": error.details},
        "timestamp": now_iso(),
        "request_id": request_id,
    }
