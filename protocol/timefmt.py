"""Timestamps as the API writes them: ISO 8601 UTC, millisecond precision, trailing Z."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime of unix milliseconds, exact."""
    # Positional (days, seconds, microseconds, milliseconds): a keyword timedelta costs more
    # than twice as much, and this runs for every reading streamed.
    return _EPOCH + timedelta(0, 0, 0, ms)


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Format an aware datetime as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    moment = moment.astimezone(UTC)
    # Not strftime("%Y"): glibc writes the year 1 as "1", not "0001".
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def now_iso() -> str:
    """Return the current time formatted for the API."""
    return iso(utcnow())


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 timestamp (``Z`` or offset) into an aware UTC datetime."""
    moment = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    if moment.tzinfo is UTC:  # Z and +00:00 give this one; no conversion to make
        return moment
    return moment.astimezone(UTC)
