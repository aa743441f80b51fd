"""Database rows as API values: UUIDs as strings, times as ISO 8601 UTC with a trailing Z."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from protocol.timefmt import iso

__all__ = ["api_value", "plain"]


def api_value(value: Any) -> Any:
    """One column's value as the API writes it (docs/design.md section 3)."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return iso(value)
    return value


def plain(row: asyncpg.Record) -> dict[str, Any]:
    """A record as a dict of API values."""
    return {key: api_value(value) for key, value in row.items()}
