"""The device registry and its views: /api/v1/devices, /sensor-devices, /fans (docs/design.md 5)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from farm_client.resources.base import Id, Resource, body_of
from protocol.schemas.actuators import (
    CommandList,
    CommandRecord,
    CommandRequest,
    FanControl,
    FanControlResult,
    FanSchedule,
)
from protocol.schemas.devices import (
    AdminStatus,
    Device,
    DeviceCreate,
    DeviceKind,
    DeviceList,
    DeviceStatus,
    DeviceStatusUpdate,
    Fan,
    FanList,
    FanStatus,
    SensorDevice,
    SensorDeviceCreate,
    SensorDeviceList,
)

__all__ = ["Devices", "Fans", "SensorDevices"]


class Devices(Resource):
    """/api/v1/devices: every device, any kind."""

    async def list(
        self,
        *,
        farm_id: Id | None = None,
        kind: DeviceKind | None = None,
        device_type: str | None = None,
        status: DeviceStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> DeviceList:
        """One page of devices."""
        params = _filters(farm_id, kind=kind, device_type=device_type, status=status)
        return await self._t.get(
            "/api/v1/devices", DeviceList, {**params, "limit": limit, "offset": offset}
        )

    def iterate(
        self,
        *,
        farm_id: Id | None = None,
        kind: DeviceKind | None = None,
        device_type: str | None = None,
        status: DeviceStatus | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[Device]:
        """Every device matching the filters."""
        params = _filters(farm_id, kind=kind, device_type=device_type, status=status)
        return self._t.pages("/api/v1/devices", DeviceList, "devices", params, page_size)

    async def get(self, device_id: Id) -> Device:
        """One device with its address and reported state."""
        return await self._t.get(f"/api/v1/devices/{device_id}", Device)

    async def create(self, body: DeviceCreate | None = None, **fields: Any) -> Device:
        """Register a device (``name``, ``farm_id``, ``kind``, ``profile``, ``address``...)."""
        return await self._t.send(
            "POST", "/api/v1/devices", Device, body_of(DeviceCreate, body, fields)
        )

    async def set_status(self, device_id: Id, status: AdminStatus) -> Device:
        """Put a device in maintenance, disable it, or make it active again."""
        path = f"/api/v1/devices/{device_id}/status"
        return await self._t.send("PUT", path, Device, DeviceStatusUpdate(status=status))

    async def delete(self, device_id: Id) -> None:
        """Remove a device from the registry."""
        await self._t.delete(f"/api/v1/devices/{device_id}")

    async def command(self, device_id: Id, kind: str, value: bool | int) -> CommandRecord:
        """Command an actuator (``power``/``valve`` true or false, ``fan_speed``/``brightness``
        0-100) and wait for the device to confirm; a device the agent cannot reach raises a
        503 ``FarmApiError``."""
        body = CommandRequest.model_validate({"kind": kind, "value": value})
        return await self._t.send(
            "POST", f"/api/v1/devices/{device_id}/commands", CommandRecord, body
        )

    async def commands(self, device_id: Id, *, limit: int = 50, offset: int = 0) -> CommandList:
        """The actuator's command history, newest first, with each outcome."""
        params = {"limit": limit, "offset": offset}
        return await self._t.get(f"/api/v1/devices/{device_id}/commands", CommandList, params)


class SensorDevices(Resource):
    """/api/v1/sensor-devices: the registry's sensors, with their sensor device fields."""

    async def list(
        self,
        *,
        farm_id: Id | None = None,
        device_type: str | None = None,
        status: DeviceStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> SensorDeviceList:
        """One page of sensor devices."""
        params = _filters(farm_id, device_type=device_type, status=status)
        path = "/api/v1/sensor-devices/"
        return await self._t.get(
            path, SensorDeviceList, {**params, "limit": limit, "offset": offset}
        )

    def iterate(
        self,
        *,
        farm_id: Id | None = None,
        device_type: str | None = None,
        status: DeviceStatus | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[SensorDevice]:
        """Every sensor device matching the filters."""
        params = _filters(farm_id, device_type=device_type, status=status)
        path = "/api/v1/sensor-devices/"
        return self._t.pages(path, SensorDeviceList, "devices", params, page_size)

    async def create(self, body: SensorDeviceCreate | None = None, **fields: Any) -> SensorDevice:
        """Register a sensor (``name``, ``farm_id``, ``device_type``, ...)."""
        payload = body_of(SensorDeviceCreate, body, fields)
        return await self._t.send("POST", "/api/v1/sensor-devices/", SensorDevice, payload)


class Fans(Resource):
    """/api/v1/fans: the registry's fans, and controlling them."""

    async def list(
        self,
        *,
        farm_id: Id | None = None,
        status: FanStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> FanList:
        """One page of fans."""
        params = _filters(farm_id, status=status)
        return await self._t.get(
            "/api/v1/fans/", FanList, {**params, "limit": limit, "offset": offset}
        )

    def iterate(
        self, *, farm_id: Id | None = None, status: FanStatus | None = None, page_size: int = 100
    ) -> AsyncIterator[Fan]:
        """Every fan matching the filters."""
        return self._t.pages(
            "/api/v1/fans/", FanList, "fans", _filters(farm_id, status=status), page_size
        )

    async def control(
        self,
        fan_id: Id,
        *,
        status: str | None = None,
        speed_percentage: int | None = None,
        schedule: FanSchedule | dict[str, Any] | None = None,
    ) -> FanControlResult:
        """Switch a fan (``running``, ``stopped``, ``auto``), set its speed or its schedule; only
        the arguments given are sent. The answer carries the command's outcome (``confirmed``,
        ``timed_out``, ``unavailable``...)."""
        fields: dict[str, Any] = {
            "status": status,
            "speed_percentage": speed_percentage,
            "schedule": schedule,
        }
        body = FanControl(**{key: value for key, value in fields.items() if value is not None})
        return await self._t.send("PUT", f"/api/v1/fans/{fan_id}", FanControlResult, body)


def _filters(farm_id: Id | None, **others: str | None) -> dict[str, str | None]:
    return {"farm_id": None if farm_id is None else str(farm_id), **others}
