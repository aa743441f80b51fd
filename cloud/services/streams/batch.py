"""What one applied sync batch tells the live streams, in the messages the agent's streams send.

The agent publishes as things happen; the cloud learns of them from the records of a batch,
and tells its clients the same way (types and ``data`` as on the agent, docs/design.md section 7):

- readings: ``reading`` on /ws/sensor-data, one per value (``raw`` and ``received_at`` are not
  synced, so they are null);
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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from protocol.live.outbox import Stream, StreamEvent
from protocol.timefmt import iso

__all__ = ["LiveBatch", "decode_events", "missed_by_stream"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DEVICE_EVENT_KINDS = {
    "device_online": "status-update",
    "device_offline": "status-update",
    "device_fault": "error",
    "command_failed": "status-update",
}
_ALERT_KINDS = frozenset({"alert_raised", "alert_cleared"})
_READINGS = "readings"
"""The wire type of a block of ``reading`` messages (one sensor, one metric)."""


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
        stamps_ms: list[int],
        values: list[float],
    ) -> None:
        """A block of one sensor's readings stored for the first time: one ``reading`` message
        per value, carried as one compact wire entry (a backlog batch holds 50,000 of them) and
        only made into messages by a process that has clients of the stream."""
        self.events.append(
            {
                "s": Stream.SENSOR_DATA.value,
                "t": _READINGS,
                "f": farm_id,
                "dv": device_id,
                "m": metric,
                "u": unit,
                "ts": stamps_ms,
                "v": values,
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


def decode_events(wire: dict[str, Any]) -> list[StreamEvent]:
    """The stream events of one wire entry of a notification (raises on a malformed one)."""
    if wire.get("t") != _READINGS:
        return [
            StreamEvent(
                stream=Stream(wire["s"]),
                type=str(wire["t"]),
                farm_id=str(wire["f"]),
                data=dict(wire["d"]),
                at=datetime.fromisoformat(str(wire["a"]).replace("Z", "+00:00")),
                device_id=wire.get("dv"),
                metric=wire.get("m"),
            )
        ]
    farm_id, device_id, metric = str(wire["f"]), str(wire["dv"]), str(wire["m"])
    unit = str(wire["u"])
    return [
        StreamEvent(
            stream=Stream.SENSOR_DATA,
            type="reading",
            farm_id=farm_id,
            data={
                "device_id": device_id,
                "metric": metric,
                "unit": unit,
                "value": value,
                "raw": None,
                "received_at": None,
            },
            at=_EPOCH + timedelta(milliseconds=int(ts_ms)),
            device_id=device_id,
            metric=metric,
        )
        for ts_ms, value in zip(wire["ts"], wire["v"], strict=True)
    ]


def missed_by_stream(events: list[dict[str, Any]]) -> Counter[Stream]:
    """How many stream events each stream carries in ``events`` (wire entries)."""
    counts: Counter[Stream] = Counter()
    for e in events:
        counts[Stream(e["s"])] += len(e["ts"]) if e.get("t") == _READINGS else 1
    return counts
