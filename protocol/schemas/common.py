"""Building blocks shared by every API model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
)

__all__ = [
    "ApiModel",
    "ErrorBody",
    "ErrorEnvelope",
    "Health",
    "PageQuery",
    "Schema",
    "Timestamp",
    "UtcDatetime",
    "Uuid",
]

Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A timestamp as stored and sent: ISO 8601 UTC with milliseconds and a trailing Z."""

Uuid = Annotated[str, WithJsonSchema({"type": "string", "format": "uuid"})]


def _utc(moment: datetime) -> datetime:
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC time
        raise ValueError("outside the range of dates this service handles") from None


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_utc)]
"""A time with its offset, as UTC; one at the very ends of the calendar is a 422, not a 500."""


class Schema(BaseModel):
    """Base of every API model. Validators and serializers are built on first use: an agent on a
    Raspberry Pi then carries only those of the endpoints it actually serves (about 2 MB less
    resident memory than building all of them at import)."""

    model_config = ConfigDict(defer_build=True)


class ApiModel(Schema):
    """Base of all request models: unknown fields are rejected, strings are trimmed, and a NUL
    character anywhere in a string is a 422 (PostgreSQL text cannot hold one; it would be a 500
    in the cloud and a truncated string in some SQLite readers)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("must not contain a NUL character")
        return value


class PageQuery(ApiModel):
    """``limit`` 1..500 (default 50) and ``offset`` 0..2^62.

    The offset's bound keeps it inside SQLite's integer range: too large is a 422, not a 500.
    """

    model_config = ConfigDict(extra="ignore")

    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=2**62)


class ErrorBody(Schema):
    """The ``error`` object of the envelope."""

    code: str
    message: str
    details: dict[str, Any]


class ErrorEnvelope(Schema):
    """Every error answer (docs/design.md section 3)."""

    success: bool = False
    error: ErrorBody
    timestamp: Timestamp
    request_id: str


class Health(Schema):
    """GET /health."""

    status: str
    timestamp: Timestamp
    version: str
