"""SQLite constraint failures re-raised as the API errors they stand for.

A UNIQUE index is how the store says "already exists" (409), a foreign key that no longer finds
its parent means the parent was deleted meanwhile (404), and a CHECK is a rule on the stored
values that the request broke (422). Anything else stays a fault.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from protocol.errors import ApiError, Conflict, FieldIssue, NotFound, ValidationFailed

__all__ = ["constraint_errors"]

# Extended result codes, https://www.sqlite.org/rescode.html#constraint_unique and siblings.
_DUPLICATE = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})
_MISSING = frozenset({"SQLITE_CONSTRAINT_FOREIGNKEY"})
_BROKEN_RULE = frozenset({"SQLITE_CONSTRAINT_CHECK"})


@contextmanager
def constraint_errors(
    *,
    duplicate: str,
    duplicate_details: Mapping[str, Any] | None = None,
    missing: str = "Resource not found",
    broken_rule: FieldIssue = ("body", "violates a rule of the stored data"),
) -> Iterator[None]:
    """Re-raise a constraint failure inside the block as 409, 404 or 422; others pass through."""
    try:
        yield
    except sqlite3.IntegrityError as err:
        mapped: ApiError
        name = getattr(err, "sqlite_errorname", "")
        if name in _DUPLICATE:
            mapped = Conflict(duplicate, duplicate_details)
        elif name in _MISSING:
            mapped = NotFound(missing)
        elif name in _BROKEN_RULE:
            mapped = ValidationFailed.of([broken_rule])
        else:
            raise
        raise mapped from err
