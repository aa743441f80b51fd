"""Outbox rows into a batch's records: entities coalesced to their newest version, raw
readings grouped per series into delta-encoded blocks, rollups resolved to their series. Only
kinds that flow up (protocol/sync_kinds.py) are sent."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.sync.outbox import READING, ROLLUP, OutboxRow
from protocol.sync import Lane, ReadingBlock, Record, encode_readings, merge_ranges
from protocol.sync_kinds import upload_kinds

__all__ = ["Outgoing", "build_records", "cut_by_bytes"]

Series = Mapping[int, tuple[str, str, str]]

_UPLOAD_KINDS = upload_kinds()


@dataclass
class Outgoing:
    """What one batch carries and accounts for."""

    records: list[Record] = field(default_factory=list)
    ranges: list[tuple[int, int]] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    dropped: int = 0
    """Rows whose series no longer exists (device deleted): accounted for, not sent."""


def cut_by_bytes(rows: Sequence[OutboxRow], max_bytes: int) -> list[OutboxRow]:
    """The longest prefix of ``rows`` within ``max_bytes`` of payload (at least one row)."""
    total = 0
    for index, row in enumerate(rows):
        total += row.bytes
        if total > max_bytes and index > 0:
            return list(rows[:index])
    return list(rows)


def build_records(rows: Sequence[OutboxRow], series: Series) -> Outgoing:
    """Records for ``rows`` and the sequence ranges they account for."""
    out = Outgoing(
        ranges=merge_ranges((row.prev, row.seq) for row in rows), seqs=[r.seq for r in rows]
    )
    newest: dict[tuple[str, str], OutboxRow] = {}
    # An entity goes where it first changed, carrying its newest data: a row created after its
    # farm and before the farm's rename still follows the farm.
    first: dict[tuple[str, str], int] = {}
    readings: dict[int, list[tuple[int, float, int]]] = defaultdict(list)
    for row in rows:
        if row.kind == READING:
            point = json.loads(row.payload)
            readings[int(point["s"])].append((int(point["t"]), float(point["v"]), row.seq))
        elif row.kind == ROLLUP:
            record = _rollup(row, series)
            if record is None:
                out.dropped += 1
            else:
                out.records.append(record)
        elif row.entity not in _UPLOAD_KINDS:
            # Not the agent's to send (identity flows from the cloud only): accounted, dropped.
            out.dropped += 1
        else:
            newest[(row.entity, row.entity_id)] = row
            first.setdefault((row.entity, row.entity_id), row.seq)
    entities = []
    for row in newest.values():
        entities.append(
            Record(
                seq=row.seq,
                lane=Lane(row.lane),
                kind=row.entity,
                op="delete" if row.op == "delete" else "upsert",
                key=row.entity_id,
                data=json.loads(row.payload),
            )
        )
    # The cloud applies records in batch order; blocks and rollups go after the entities.
    out.records.sort(key=lambda r: r.seq)
    order = {key: pos for pos, key in enumerate(sorted(newest, key=first.__getitem__))}
    entities.sort(key=lambda r: order[(r.kind, r.key)])
    for series_id, points in readings.items():
        found = series.get(series_id)
        if found is None:
            out.dropped += len(points)
            continue
        device_id, metric, unit = found
        points.sort()
        data = encode_readings(
            ReadingBlock(device_id, metric, [p[0] for p in points], [p[1] for p in points])
        )
        data["u"] = unit
        out.records.append(
            Record(
                seq=max(p[2] for p in points),
                lane=Lane.BULK,
                kind="readings",
                op="upsert",
                key=f"{device_id}/{metric}",
                data=data,
            )
        )
    out.records[:0] = entities
    return out


def _rollup(row: OutboxRow, series: Series) -> Record | None:
    point = json.loads(row.payload)
    found = series.get(int(point["s"]))
    if found is None:
        return None
    device_id, metric, unit = found
    return Record(
        seq=row.seq,
        lane=Lane.BULK,
        kind="readings_1m",
        op="upsert",
        key=f"{device_id}/{metric}/{point['t']}",
        data={
            "device_id": device_id, "metric": metric, "unit": unit, "ts": point["t"],
            "min": point["min"], "max": point["max"], "sum": point["sum"], "n": point["n"],
        },
    )  # fmt: skip


def series_ids(rows: Sequence[OutboxRow]) -> list[int]:
    """The reading series that ``rows`` refer to."""
    return sorted({int(r.entity_id) for r in rows if r.kind in (READING, ROLLUP)})


def now_ms() -> int:
    """Unix time in milliseconds, as a batch's ``sent_at``."""
    return int(time.time() * 1000)
