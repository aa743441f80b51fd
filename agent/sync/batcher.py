"""Outbox rows into a batch's records: entities coalesced to their newest version, raw
readings grouped per series into delta-encoded blocks, rollups into one block per series and
width (each rollup keeping its own sequence number). Only kinds that flow up
(protocol/sync_kinds.py) are sent."""

from __future__ import annotations

import json
import time
from array import array
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from agent.sync.outbox_rows import (
    HOUR_MS,
    MINUTE_MS,
    EntityRow,
    Rollups,
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
    # Grouped by row number, straight from the columns: no object per row.
    rollups = rows.rollups
    for (series_id, width_ms), members in _groups(
        zip(rollups.series_id, rollups.width_ms, strict=True)
    ).items():
        record = _rollups(series_id, width_ms, rollups, members, series)
        if record is None:
            out.dropped += len(members)
        else:
            out.records.append(record)
    readings = rows.readings
    seq, ts, value = readings.seq, readings.ts, readings.value
    for series_id, points in _groups(readings.series_id).items():
        found = series.get(series_id)
        if found is None:
            out.dropped += len(points)
            continue
        device_id, metric, unit = found
        ranked = sorted(points, key=lambda i: (ts[i], seq[i]))
        data = encode_readings(
            ReadingBlock(device_id, metric, [ts[i] for i in ranked], [value[i] for i in ranked])
        )
        data["u"] = unit
        out.records.append(
            Record(
                seq=max(seq[i] for i in points),
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


_K = TypeVar("_K", bound=Hashable)


def _groups(keys: Iterable[_K]) -> dict[_K, array[int]]:
    """The row numbers of each key, keys in the order they first come."""
    groups: dict[_K, array[int]] = {}
    for index, key in enumerate(keys):
        found = groups.get(key)
        if found is None:
            groups[key] = found = array("q")
        found.append(index)
    return groups


def _rollups(
    series_id: int, width_ms: int, rows: Rollups, members: array[int], series: Series
) -> Record | None:
    """One block for the rollups of a series and width (rows ``members`` of ``rows``), each
    under its own number."""
    found = series.get(series_id)
    if found is None:
        return None
    device_id, metric, unit = found
    order = sorted(members, key=rows.seq.__getitem__)
    block = RollupBlock(
        device_id=device_id,
        metric=metric,
        unit=unit,
        width=_WIDTH[width_ms],
        seqs=[rows.seq[i] for i in order],
        buckets_ms=[rows.ts[i] for i in order],
        mins=[rows.vmin[i] for i in order],
        maxes=[rows.vmax[i] for i in order],
        sums=[rows.vsum[i] for i in order],
        counts=[rows.n[i] for i in order],
    )
    return Record(
        seq=block.seqs[-1],
        lane=Lane.BULK,
        kind=ROLLUP_BLOCK,
        op="upsert",
        key=f"{device_id}/{metric}/{block.width}",
        data=encode_rollups(block),
    )


def series_ids(rows: Selection) -> list[int]:
    """The reading series that ``rows`` refer to."""
    return sorted(set(rows.readings.series_id) | set(rows.rollups.series_id))


def now_ms() -> int:
    """Unix time in milliseconds, as a batch's ``sent_at``."""
    return int(time.time() * 1000)
