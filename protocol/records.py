"""Immutable records for values made in large numbers (one or more per reading ingested).

``@record`` is a slots dataclass that the type checker treats as frozen (assigning a field is
a mypy error) and that compares and hashes by value like a frozen one. At run time it skips
frozen's guard: a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__``, three times the cost of building the same object (1.1 against 0.3 us
for seven fields), and the ingest path builds several such values per reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

__all__ = ["record"]

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def record(cls: type[_T]) -> type[_T]:
    """Make ``cls`` a slots dataclass, frozen for the type checker, hashed by value."""
    return dataclass(slots=True, unsafe_hash=True)(cls)
