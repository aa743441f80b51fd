"""Outbox rows into a batch's records: entities coalesced to their newest version, raw
readings grouped per series into delta-encoded blocks, rollups into one block per series and
width (each rollup keeping its own sequence number). Only kinds that flow up
(protocol/sync_kinds.py) are sent."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.sync.outbox_rows import (
    HOUR_MS,
    MINUTE_MS,
    EntityRow,
    QueuedReading,
    QueuedRollup,
    Selection,
)
from protocol.sync import (
    ROLLUP_BLOCK,
    Lane,
    ReadingBlock,
    Record,
    RollupBlock,
    encode_readings,
    encode_rollups,
)
from protocol.sync_kinds import upload_kinds

__all__ = ["Outgoing", "Series", "build_records", "now_ms", "series_ids"]

Series = Mapping[int, tuple[str, str, str]]

_UPLOAD_KINDS = upload_kinds()


@dataclass
class Outgoing:
    """What one batch carries."""

    records: list[Record] = field(default_factory=list)
    dropped: int = 0
    """Rows whose series no longer exists (device deleted), or of a kind that does not flow up:
    accounted for, not sent."""


def build_records(rows: Selection, series: Series) -> Outgoing:
    """Records for a selection: entities coalesced to their newest version, readings as one
    delta-encoded block per series, rollups one record each."""
    out = Outgoing()
    newest: dict[tuple[str, str], EntityRow] = {}
    # An entity goes where it first changed, carrying its newest data: a row created after its
    # farm and before the farm's rename still follows the farm.
    first: dict[tuple[str, str], int] = {}
    for row in rows.entities:
        if row.entity not in _UPLOAD_KINDS:
            # Not the agent's to send (identity flows from the cloud only): accounted, dropped.
            out.dropped += 1
            continue
        newest[(row.entity, row.entity_id)] = row
        first.setdefault((row.entity, row.entity_id), row.seq)
    entities = [
        Record(
            seq=row.seq,
            lane=Lane(row.lane),
            kind=row.entity,
            op="delete" if row.op == "delete" else "upsert",
            key=row.entity_id,
            data=json.loads(row.payload),
        )
        for row in newest.values()
    ]
    order = {key: pos for pos, key in enumerate(sorted(newest, key=first.__getitem__))}
    entities.sort(key=lambda r: order[(r.kind, r.key)])
    # The cloud applies records in batch order; rollups and blocks go after the entities.
    rollups: dict[tuple[int, int], list[QueuedRollup]] = defaultdict(list)
    for rollup in rows.rollups:
        rollups[(rollup.series_id, rollup.width_ms)].append(rollup)
    for (series_id, width_ms), members in rollups.items():
        record = _rollups(series_id, width_ms, members, series)
        if record is None:
            out.dropped += len(members)
        else:
            out.records.append(record)
    readings: dict[int, list[QueuedReading]] = defaultdict(list)
    for reading in rows.readings:
        readings[reading.series_id].append(reading)
    for series_id, points in readings.items():
        found = series.get(series_id)
        if found is None:
            out.dropped += len(points)
            continue
        device_id, metric, unit = found
        points.sort(key=lambda p: (p.ts, p.seq))
        data = encode_readings(
            ReadingBlock(device_id, metric, [p.ts for p in points], [p.value for p in points])
        )
        data["u"] = unit
        out.records.append(
            Record(
                seq=max(p.seq for p in points),
                lane=Lane.BULK,
                kind="readings",
                op="upsert",
                key=f"{device_id}/{metric}",
                data=data,
            )
        )
    out.records[:0] = entities
    return out


_WIDTH = {MINUTE_MS: "1m", HOUR_MS: "1h"}


def _rollups(
    series_id: int, width_ms: int, members: list[QueuedRollup], series: Series
) -> Record | None:
    """One block for the rollups of a series and width, each under its own number."""
    found = series.get(series_id)
    if found is None:
        return None
    device_id, metric, unit = found
    members.sort(key=lambda r: r.seq)
    block = RollupBlock(
        device_id=device_id,
        metric=metric,
        unit=unit,
        width=_WIDTH[width_ms],
        seqs=[r.seq for r in members],
        buckets_ms=[r.ts for r in members],
        mins=[r.vmin for r in members],
        maxes=[r.vmax for r in members],
        sums=[r.vsum for r in members],
        counts=[r.n for r in members],
    )
    return Record(
        seq=members[-1].seq,
        lane=Lane.BULK,
        kind=ROLLUP_BLOCK,
        op="upsert",
        key=f"{device_id}/{metric}/{block.width}",
        data=encode_rollups(block),
    )


def series_ids(rows: Selection) -> list[int]:
    """The reading series that ``rows`` refer to."""
    return sorted({r.series_id for r in rows.readings} | {r.series_id for r in rows.rollups})


def now_ms() -> int:
    """Unix time in milliseconds, as a batch's ``sent_at``."""
    return int(time.time() * 1000)
