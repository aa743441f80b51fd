"""The rows of the sync outbox as the uploader and the batcher see them (agent/sync/outbox.py):
entity changes, queued readings and rollups, a batch's selection of them, and the figures
operators watch."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class Selection:
    """Rows for one batch, each kind in sequence order."""

    entities: list[EntityRow] = field(default_factory=list)
    readings: list[QueuedReading] = field(default_factory=list)
    rollups: list[QueuedRollup] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entities) + len(self.readings) + len(self.rollups)

    @property
    def seqs(self) -> list[int]:
        """Every sequence number the selection holds."""
        return sorted(
            [r.seq for r in self.entities]
            + [r.seq for r in self.readings]
            + [r.seq for r in self.rollups]
        )

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
        bulk: list[QueuedReading | QueuedRollup] = [*self.rollups, *self.readings]
        bulk = sorted(bulk, key=lambda r: r.seq)[: max(0, rest)]
        return Selection(
            entities,
            [r for r in bulk if isinstance(r, QueuedReading)],
            [r for r in bulk if isinstance(r, QueuedRollup)],
        )


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
