"""The database file's size in pages, and the cap on it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_PAGES", "DatabaseSize"]

# SQLite's own ceiling of max_page_count (https://www.sqlite.org/pragma.html#pragma_max_page_count).
MAX_PAGES = 4_294_967_294


@dataclass(frozen=True, slots=True)
class DatabaseSize:
    """The database file in pages: used, free inside it (reused by new writes), and its cap."""

    page_size: int
    pages: int
    free_pages: int
    max_pages: int

    @property
    def room_under_cap(self) -> int:
        """Bytes new writes may still take under the size cap (free pages included)."""
        return (self.max_pages - self.pages + self.free_pages) * self.page_size

    @property
    def reusable(self) -> int:
        """Bytes of free pages inside the file: SQLite reuses them before it grows the file."""
        return self.free_pages * self.page_size
