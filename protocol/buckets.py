"""Epoch-aligned time buckets and the round widths a reading query picks from (docs/design.md 6)."""

from __future__ import annotations

__all__ = ["NICE_WIDTHS_MS", "bucket_count", "nice_width"]

_S = 1000
_MINUTE = 60 * _S
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
NICE_WIDTHS_MS = (
    *(s * _S for s in (1, 2, 5, 10, 15, 30)),
    *(m * _MINUTE for m in (1, 2, 5, 10, 15, 30)),
    *(h * _HOUR for h in (1, 2, 3, 6, 12)),
    *(d * _DAY for d in (1, 2, 7, 14, 28, 91, 364)),
)


def bucket_count(start: int, end: int, width: int) -> int:
    """Epoch-aligned buckets of ``width`` overlapping ``[start, end)``."""
    return (end - 1) // width - start // width + 1


def nice_width(start: int, end: int, budget: int, floor: int) -> int:
    """The narrowest round width, at least ``floor``, that keeps the buckets within budget."""
    for width in NICE_WIDTHS_MS:
        if width >= floor and bucket_count(start, end, width) <= budget:
            return width
    width = NICE_WIDTHS_MS[-1]
    while bucket_count(start, end, width) > budget:
        width *= 2
    return width
