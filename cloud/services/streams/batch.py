"""What one applied sync batch tells the live streams, in the messages the agent's streams send.

The agent publishes as things happen; the cloud learns of them from the records of a batch,
and tells its clients the same way (types and ``data`` as on the agent, DESIGN.md section 7):

- readings: ``reading`` on /ws/sensor-data, one per value (``raw`` and ``received_at`` are not
  synced, so they are null); between processes a block of one series travels as one wire entry
  (columns of times and values), expanded into messages only where a client listens: a catch-up
  batch of 50,000 readings cost the cloud more as 50,000 JSON messages than as rows;
- events: alerts raised and cleared (``alert``), farm status changes (``farm-status``) and the
  other events (``notice``) on /ws/farm-status; a device's availability (``status-update``), its
  faults (``error``) and its failed commands (``status-update``, ``event: command``) on
  /ws/device-events, as the agent sent them live;
- devices: a change of a device's reported state (``status-update``, ``event: state``);
- farms: a farm deleted (``farm-status``, ``status: deleted``);
- climate history: the loop's actions, fail-safes and holds (``climate``) on /ws/farm-status.

Only records that changed the mirror count: a record applied before, or refused, tells nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from protocol.live.outbox import Stream, StreamEvent
from protocol.timefmt import iso

__all__ = ["LiveBatch", "decode_events", "missed_by_stream", "size_of", "stream_of"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DEVICE_EVENT_KINDS = {
    "device_online": "status-update",
    "device_offline": "status-update",
    "device_fault": "error",
    "command_failed": "status-update",
}
_ALERT_KINDS = frozenset({"alert_raised", "alert_cleared"})
_READINGS = "readings"
"""Wire type of a block of readings of one series (``ts``: times in ms, ``v``: values)."""


@dataclass
class LiveBatch:
    """Collects the stream messages of one batch while it is applied."""

    events: list[dict[str, Any]] = field(default_factory=list)

    def _add(
        self,
        stream: Stream,
        type_: str,
        farm_id: str,
        data: dict[str, Any],
        at: str,
        device_id: str | None = None,
        metric: str | None = None,
    ) -> None:
        self.events.append(
            {
                "s": stream.value,
                "t": type_,
                "f": farm_id,
                "d": data,
                "a": at,
                "dv": device_id,
                "m": metric,
            }
        )

    def readings(
        self,
        farm_id: str,
        device_id: str,
        metric: str,
        unit: str,
        stamps_ms: Sequence[int],
        values: Sequence[float],
    ) -> None:
        """Readings of one series stored for the first time: one ``reading`` message each."""
        self.events.append(
            {
                "s": Stream.SENSOR_DATA.value,
                "t": _READINGS,
                "f": farm_id,
                "dv": device_id,
                "m": metric,
                "u": unit,
                "ts": list(stamps_ms),
                "v": list(values),
            }
        )

    def event(self, record: dict[str, Any]) -> None:
        """An event of the agent's log stored for the first time (the agent's row)."""
        kind = str(record.get("kind", ""))
        farm_id = str(record["farm_id"])
        device_id = None if record.get("device_id") is None else str(record["device_id"])
        data = record.get("data") or {}
        at = str(record.get("ts"))
        device_type = _DEVICE_EVENT_KINDS.get(kind)
        if device_type is not None and device_id is not None:
            # The agent stored the device event's own data: send it as it was sent live.
            self._add(
                Stream.DEVICE_EVENTS,
                device_type,
                farm_id,
                {"device_id": device_id, **data},
                at,
                device_id,
            )
            return
        payload = {
            "event_id": str(record["id"]),
            "kind": kind,
            "severity": record.get("severity"),
            "message": record.get("message", ""),
            "device_id": device_id,
            **data,
        }
        if kind == "farm_status":
            type_ = "farm-status"
            payload = {"event": "updated", **data}
        elif kind in _ALERT_KINDS:
            type_ = "alert"
        else:
            type_ = "notice"
        self._add(Stream.FARM_STATUS, type_, farm_id, payload, at, device_id)

    def device_state(self, record: dict[str, Any], state: Any) -> None:
        """A device's reported state that differs from what the mirror held."""
        device_id = str(record["id"])
        self._add(
            Stream.DEVICE_EVENTS,
            "status-update",
            str(record["farm_id"]),
            {"device_id": device_id, "event": "state", "state": state},
            str(record.get("state_updated_at") or record.get("updated_at")),
            device_id,
        )

    def climate(self, record: dict[str, Any]) -> None:
        """A climate loop's action, fail-safe or manual hold stored for the first time (settings
        changes are not sent live, as on the agent)."""
        kind = str(record.get("kind"))
        if kind == "settings":
            return
        self._add(
            Stream.FARM_STATUS,
            "climate",
            str(record["farm_id"]),
            {"event": kind, "row_id": record.get("row_id"),
             "settings_id": record.get("settings_id"), **(record.get("data") or {})},
            str(record.get("at")),
        )  # fmt: skip

    def farm_deleted(self, farm_id: str, at: datetime) -> None:
        """A farm the agent deleted (the mirror's copy went with it)."""
        self._add(
            Stream.FARM_STATUS, "farm-status", farm_id, {"status": "deleted", "event": "deleted"},
            iso(at),
        )  # fmt: skip


def size_of(wire: dict[str, Any]) -> int:
    """How many stream messages a wire entry stands for."""
    return len(wire["ts"]) if wire.get("t") == _READINGS else 1


def stream_of(wire: dict[str, Any]) -> Stream:
    """The stream a wire entry's messages go to (raises on a malformed one)."""
    return Stream(wire["s"])


def decode_events(wire: dict[str, Any]) -> list[StreamEvent]:
    """The stream messages of a wire entry in a notification (raises on a malformed one)."""
    if wire.get("t") != _READINGS:
        return [_decode(wire)]
    farm_id, device_id, metric, unit = (str(wire[k]) for k in ("f", "dv", "m", "u"))
    stamps, values = list(wire["ts"]), list(wire["v"])
    if len(stamps) != len(values):
        raise ValueError("a reading block's columns differ in length")
    return [
        StreamEvent(
            stream=Stream.SENSOR_DATA,
            type="reading",
            farm_id=farm_id,
            data={
                "device_id": device_id,
                "metric": metric,
                "unit": unit,
                "value": float(value),
                "raw": None,
                "received_at": None,
            },
            at=_EPOCH + timedelta(milliseconds=int(ts)),
            device_id=device_id,
            metric=metric,
        )
        for ts, value in zip(stamps, values, strict=True)
    ]


def _decode(wire: dict[str, Any]) -> StreamEvent:
    return StreamEvent(
        stream=Stream(wire["s"]),
        type=str(wire["t"]),
        farm_id=str(wire["f"]),
        data=dict(wire["d"]),
        at=datetime.fromisoformat(str(wire["a"]).replace("Z", "+00:00")),
        device_id=wire.get("dv"),
        metric=wire.get("m"),
    )


def missed_by_stream(events: list[dict[str, Any]]) -> Counter[Stream]:
    """How many messages of ``events`` (wire entries) each stream carries."""
    counts: Counter[Stream] = Counter()
    for wire in events:
        counts[stream_of(wire)] += size_of(wire)
    return counts
