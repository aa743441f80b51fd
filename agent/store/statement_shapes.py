"""Chunks of a few fixed lengths for statements built with a placeholder per value.

A statement such as ``INSERT ... VALUES (?, ...), (?, ...)`` or ``... IN (?, ?, ...)`` is built
for the length of its chunk, and SQLite keeps every distinct text as a prepared statement in
the connection's statement cache (Python's ``sqlite3`` keeps the last 128 per connection). Cut
at whatever length a batch happened to have, each batch's rest was a statement of its own: at a
farm's pace the writer's cache held 1.7 MB of statements after a minute and kept growing, and
a 500-row insert of staged readings alone keeps 337 KB prepared (a 70-row one 46 KB, a 500-key
``IN`` list 100 KB). Cut into chunks of the full length and then powers of two, a statement has
at most ten shapes, each prepared once and found in the cache from then on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["fixed_chunks"]

T = TypeVar("T")


def fixed_chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in order, in chunks of ``size``; the rest in chunks of powers of two, largest
    first (70 left: 64, 4 and 2)."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        if len(chunk) == size:
            yield chunk
            continue
        start = 0
        while start < len(chunk):
            piece = 1 << ((len(chunk) - start).bit_length() - 1)
            yield chunk[start : start + piece]
            start += piece
