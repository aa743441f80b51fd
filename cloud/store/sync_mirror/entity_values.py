"""The agent's row values as the mirror's columns take them, checked as the agent's API checks
them (a value the API would refuse raises ValueError: the record is refused alone)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter, ValidationError

from protocol.schemas.devices import Address, ModbusAddress, MqttAddress, SerialAddress
from protocol.schemas.grow_plans import Stage

__all__ = [
    "CALIBRATION_METHOD",
    "device_address",
    "harvest_day",
    "harvested",
    "json_value",
    "plan_stages",
    "timestamp",
    "uuid_of",
]

# The agent's calibration methods (agent migration 0003) as the mirror names them (cloud 0003).
CALIBRATION_METHOD = {"on_device": "device", "agent_linear": "agent", "agent_offset": "agent"}


def json_value(value: Any) -> Any:
    """A JSON column the agent's trigger wrote as text, as a value."""
    return json.loads(value) if isinstance(value, str) else (value or {})


_STAGES = TypeAdapter(list[Stage])
_ADDRESS: TypeAdapter[MqttAddress | SerialAddress | ModbusAddress] = TypeAdapter(Address)


def device_address(d: dict[str, Any]) -> dict[str, Any]:
    """A synced device's address in the API's one shape (``protocol.schemas.devices.Address``:
    ``topic_base`` and ``variables``, or ``port`` and line settings), from the agent's columns;
    ``{}`` for a device bound to no transport. Raises ValueError on one the API would refuse."""
    transport = d.get("transport")
    if transport == "mqtt" and d.get("topic_base"):
        given: dict[str, Any] = {
            "transport": "mqtt",
            "topic_base": d["topic_base"],
            "variables": json_value(d.get("topic_variables")) or {},
        }
    elif transport == "serial" and d.get("serial_port"):
        given = {
            "transport": "serial",
            "port": d["serial_port"],
            **(json_value(d.get("serial_settings")) or {}),
        }
    elif transport == "modbus" and d.get("serial_port"):
        given = {"transport": "modbus", **(json_value(d.get("serial_settings")) or {})}
    else:
        return {}
    try:
        address = _ADDRESS.validate_python(given)
    except ValidationError as err:
        raise ValueError(f"a device's address is malformed: {err.error_count()} errors") from None
    return address.model_dump(exclude_none=True)


def plan_stages(d: dict[str, Any]) -> list[Any]:
    """A synced plan's stages, checked as the agent's API checks them: at least one, each a
    valid stage, adding up to the plan's ``total_days`` (its harvest date is derived from it).
    Raises ValueError: the record is refused alone."""
    stages = json_value(d.get("stages")) or []
    try:
        parsed = _STAGES.validate_python(stages)
    except ValidationError as err:
        raise ValueError(
            f"a grow plan's stages are malformed: {err.error_count()} errors"
        ) from None
    if not parsed:
        raise ValueError("a grow plan has at least one stage")
    total = d.get("total_days")
    if total is not None and int(total) != sum(stage.days for stage in parsed):
        raise ValueError("a grow plan's total_days is not the sum of its stages' days")
    return list(stages)


def harvested(value: Any) -> Decimal | None:
    """A harvested quantity as sent (a JSON number), exactly as numeric."""
    return None if value is None else Decimal(str(value))


def timestamp(value: Any) -> datetime | None:
    """An agent timestamp (ISO 8601 with a trailing Z) as asyncpg takes it."""
    if value is None or value == "":
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def harvest_day(start_date: Any, total_days: Any) -> datetime | None:
    """The plan's last day (the agent's local calendar date) at 00:00 UTC: the mirror has no
    farm time zone, and a dashboard shows the date."""
    if not start_date or not total_days:
        return None
    day = date.fromisoformat(str(start_date)) + timedelta(days=int(total_days) - 1)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def uuid_of(value: Any) -> UUID | None:
    return None if value is None else UUID(str(value))
