"""The rows of the sync outbox as the uploader and the batcher see them (agent/sync/outbox.py):
entity changes, queued readings and rollups, a batch's selection of them, and the figures
operators watch.

A batch's readings and rollups are held as columns of machine numbers (:class:`Readings`,
:class:`Rollups`), not as an object per row: a drain holds two batches of up to 25,000 rows
(the one posted, the next prepared beside it), which as objects cost about 190 bytes a reading
and 300 a rollup, and as columns 32 and 64."""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, ClassVar, Generic, Self, TypeVar, overload

from agent.store.outbox_sequence import READING_BYTES

__all__ = [
    "HOUR_MS",
    "MINUTE_MS",
    "READING_BYTES",
    "ROLLUP_BYTES",
    "Compaction",
    "EntityRow",
    "OutboxFigures",
    "QueuedReading",
    "QueuedRollup",
    "Readings",
    "Rollups",
    "Selection",
]

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
ROLLUP_BYTES = 64
"""A queued rollup's share of the byte figure."""


@dataclass(frozen=True, slots=True)
class EntityRow:
    """One change of an entity (farm, device, event...)."""

    seq: int
    lane: int
    kind: str
    entity: str
    entity_id: str
    op: str
    payload: str
    bytes: int


@dataclass(frozen=True, slots=True)
class QueuedReading:
    """A raw reading waiting for the cloud."""

    seq: int
    series_id: int
    ts: int
    value: float


@dataclass(frozen=True, slots=True)
class QueuedRollup:
    """A rollup standing for readings of one series and bucket that were not sent raw."""

    seq: int
    series_id: int
    width_ms: int
    ts: int
    vmin: float
    vmax: float
    vsum: float
    n: int


_Row = TypeVar("_Row", QueuedReading, QueuedRollup)


class _Columns(Sequence[_Row], Generic[_Row]):
    """Rows of one kind in sequence order, one array per field; indexing or iterating makes a
    row object on demand (tests, a rare resend), the batch's own work reads the columns."""

    __slots__ = ("_columns",)
    _row: ClassVar[type]
    _codes: ClassVar[str]
    _fields: ClassVar[tuple[str, ...]]

    def __init__(self, rows: Iterable[_Row] = ()) -> None:
        self._columns: tuple[array[Any], ...] = tuple(array(code) for code in self._codes)
        self.extend(tuple(getattr(row, name) for name in self._fields) for row in rows)

    def extend(self, rows: Iterable[Sequence[Any]]) -> None:
        """Append database rows (their fields in the row type's order)."""
        for column, values in zip(self._columns, zip(*rows, strict=True), strict=False):
            column.extend(values)

    def append(self, row: Sequence[Any]) -> None:
        for column, value in zip(self._columns, row, strict=True):
            column.append(value)

    @property
    def seq(self) -> array[int]:
        return self._columns[0]

    @property
    def series_id(self) -> array[int]:
        return self._columns[1]

    def __len__(self) -> int:
        return len(self._columns[0])

    @overload
    def __getitem__(self, index: int) -> _Row: ...
    @overload
    def __getitem__(self, index: slice) -> Self: ...
    def __getitem__(self, index: int | slice) -> _Row | Self:
        if isinstance(index, slice):
            return self._of(tuple(column[index] for column in self._columns))
        row: _Row = self._row(*(column[index] for column in self._columns))
        return row

    def __iter__(self) -> Iterator[_Row]:
        for values in zip(*self._columns, strict=True):
            yield self._row(*values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Columns):
            return type(other) is type(self) and other._columns == self._columns
        return isinstance(other, list) and list(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"

    @classmethod
    def _of(cls, columns: tuple[array[Any], ...]) -> Self:
        made = cls()
        made._columns = columns
        return made

    def upto(self, seq: int) -> Self:
        """The rows numbered ``seq`` or lower."""
        return self[: bisect_right(self.seq, seq)]


class Readings(_Columns[QueuedReading]):
    """Queued raw readings as columns: seq, series_id, ts (int64), value (double)."""

    __slots__ = ()
    _row = QueuedReading
    _codes = "qqqd"
    _fields = ("seq", "series_id", "ts", "value")

    @property
    def ts(self) -> array[int]:
        return self._columns[2]

    @property
    def value(self) -> array[float]:
        return self._columns[3]


class Rollups(_Columns[QueuedRollup]):
    """Queued rollups as columns: seq, series_id, width_ms, ts, vmin, vmax, vsum, n."""

    __slots__ = ()
    _row = QueuedRollup
    _codes = "qqqqdddq"
    _fields = ("seq", "series_id", "width_ms", "ts", "vmin", "vmax", "vsum", "n")

    @property
    def width_ms(self) -> array[int]:
        return self._columns[2]

    @property
    def ts(self) -> array[int]:
        return self._columns[3]

    @property
    def vmin(self) -> array[float]:
        return self._columns[4]

    @property
    def vmax(self) -> array[float]:
        return self._columns[5]

    @property
    def vsum(self) -> array[float]:
        return self._columns[6]

    @property
    def n(self) -> array[int]:
        return self._columns[7]


@dataclass
class Selection:
    """Rows for one batch, each kind in sequence order."""

    entities: list[EntityRow] = field(default_factory=list)
    readings: Readings = field(default_factory=Readings)
    rollups: Rollups = field(default_factory=Rollups)

    def __len__(self) -> int:
        return len(self.entities) + len(self.readings) + len(self.rollups)

    @property
    def seqs(self) -> array[int]:
        """Every sequence number the selection holds, ascending (a column, as its rows)."""
        entities = sorted(r.seq for r in self.entities)
        return array("q", heapq.merge(entities, self.readings.seq, self.rollups.seq))

    @property
    def top(self) -> int:
        """The highest number of its readings and rollups (0 without any)."""
        return max(self.readings.seq[-1:] + self.rollups.seq[-1:], default=0)

    @property
    def bytes(self) -> int:
        """The selection's share of the outbox's byte figure."""
        return (
            sum(r.bytes for r in self.entities)
            + READING_BYTES * len(self.readings)
            + ROLLUP_BYTES * len(self.rollups)
        )

    def head(self, count: int) -> Selection:
        """The first ``count`` rows: entities, then rollups and readings by sequence."""
        entities = self.entities[:count]
        rest = count - len(entities)
        if rest <= 0:
            return Selection(entities)
        # Each kind is in sequence order: the rest-th lowest number of both is the cut.
        both = heapq.merge(self.readings.seq, self.rollups.seq)
        cut = next(islice(both, rest - 1, None), None)
        if cut is None:
            return Selection(entities, self.readings, self.rollups)
        return Selection(entities, self.readings.upto(cut), self.rollups.upto(cut))


@dataclass(frozen=True, slots=True)
class OutboxFigures:
    """What operators watch (docs/design.md section 8)."""

    records: int
    bytes: int
    lag: int
    oldest_unsent_ms: int | None
    rolled_up: int
    rejected: int
    acked_seq: int
    last_success_ms: int | None


@dataclass(frozen=True, slots=True)
class Compaction:
    """What one compaction step did."""

    replaced: int
    """Readings (or 1-minute rollups) folded into coarser rollups."""
    freed_bytes: int
