"""The device registry: registration, its views, and what the device runtime reports into it.

Web handlers call the use cases (authorized here); the runtime (MQTT gateway, serial ports,
reading writer) binds the devices ``bindings()`` returns, hears about changes through a
``RegistryListener``, and reports availability, readings and state through the ``record_*``
methods.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

import aiosqlite

from agent.devices.codec import DeviceCodec
from agent.devices.ezo import ezo_serial_settings
from agent.devices.profiles import FirmwareProfile, ProfileRegistry
from agent.devices.serial_port import SerialSettings
from agent.services.devices.rules import resolve_registration
from agent.services.devices.views import device_view, fan_view, sensor_device_view
from agent.store.access import farm_grant
from agent.store.calibrations import CalibrationRecord, CalibrationStore, write_calibration
from agent.store.db import Database
from agent.store.devices import DeviceFilter, DeviceStore, DuplicateDevice
from protocol.access import Action, authorize
from protocol.errors import Conflict, NotFound
from protocol.identity import Principal
from protocol.schemas.devices import (
    Device,
    DeviceCreate,
    DeviceLink,
    DeviceList,
    DeviceListQuery,
    DeviceProfile,
    DeviceProfileList,
    DeviceProfileMetric,
    DeviceStatusUpdate,
    DeviceUpdate,
    FanList,
    FanListQuery,
    ModbusAddress,
    MqttAddress,
    SensorDevice,
    SensorDeviceCreate,
    SensorDeviceList,
    SensorDeviceQuery,
    SerialAddress,
)
from protocol.timefmt import iso, utcnow

__all__ = ["DeviceBinding", "DeviceService", "RegistryListener"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceBinding:
    """What the runtime needs to talk to one device."""

    device_id: str
    farm_id: str
    kind: str
    profile: FirmwareProfile
    topic_base: str | None
    variables: Mapping[str, str]
    serial_port: str | None
    serial_overrides: Mapping[str, Any]

    def mqtt_codec(self) -> DeviceCodec:
        """The codec binding an MQTT device's profile to its topic base."""
        if self.topic_base is None:
            raise ValueError(f"device {self.device_id} is not an MQTT device")
        return DeviceCodec(self.profile, self.topic_base, self.variables)

    def serial_settings(self) -> SerialSettings:
        """Port settings: the profile's [serial] table with the registration's overrides."""
        if self.serial_port is None or self.profile.serial is None:
            raise ValueError(f"device {self.device_id} is not a serial device")
        settings = ezo_serial_settings(self.serial_port, self.profile.serial)
        return replace(settings, **dict(self.serial_overrides))


class RegistryListener(Protocol):
    """The runtime's interest in registry changes (bind new devices, unbind removed ones)."""

    async def device_bound(self, binding: DeviceBinding) -> None: ...
    async def device_unbound(self, device_id: str) -> None: ...


class DeviceService:
    """Devices as the caller may see and change them, and as the runtime reports them."""

    def __init__(
        self,
        db: Database,
        devices: DeviceStore,
        calibrations: CalibrationStore,
        profiles: ProfileRegistry,
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = db
        self._devices = devices
        self._calibrations = calibrations
        self.profiles = profiles
        self._now = now
        self._listeners: list[RegistryListener] = []
        self._link_of: Callable[[str], Mapping[str, int] | None] = lambda _: None

    def set_link_source(self, link_of: Callable[[str], Mapping[str, int] | None]) -> None:
        """Where a device's link counters come from (the runtime's Modbus buses)."""
        self._link_of = link_of

    def _with_link(self, device: Device) -> Device:
        counters = self._link_of(str(device.id))
        if counters is None:
            return device
        return device.model_copy(update={"link": DeviceLink.model_validate(counters)})

    def add_listener(self, listener: RegistryListener) -> None:
        """Tell ``listener`` about devices registered, removed, disabled or re-enabled."""
        self._listeners.append(listener)

    # Authorization -----------------------------------------------------------------------------

    async def device_for(self, principal: Principal, device_id: str, action: Action) -> sqlite3.Row:
        """The device if its farm is visible (else 404) and ``action`` is allowed (else 403)."""
        row = await self._devices.get(device_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Device not found")
        authorize(principal, action, grant)
        return row

    async def authorize_farm(self, principal: Principal, farm_id: str, action: Action) -> None:
        """Raise 404 if the farm is not visible, 403 if ``action`` is not allowed on it."""
        authorize(principal, action, await farm_grant(self._db, principal, farm_id))

    # Registration ------------------------------------------------------------------------------

    async def register(self, principal: Principal, body: DeviceCreate) -> Device:
        """Register a device of any kind on a farm the caller manages."""
        device_id = await self._register(principal, body.model_dump(), body.address)
        return await self._device(device_id)

    async def register_sensor(self, principal: Principal, body: SensorDeviceCreate) -> SensorDevice:
        """Register a sensor device (POST /sensor-devices/)."""
        fields = {**body.model_dump(), "kind": "sensor"}
        device_id = await self._register(principal, fields, body.address)
        row = await self._devices.get(device_id)
        if row is None:
            raise NotFound("Device not found")
        return sensor_device_view(row, await self._calibrations.active(device_id))

    async def _register(
        self,
        principal: Principal,
        fields: dict[str, Any],
        address: MqttAddress | SerialAddress | ModbusAddress | None,
    ) -> str:
        await self.authorize_farm(principal, str(fields["farm_id"]), Action.MANAGE)
        registration = resolve_registration(self.profiles, fields, address)

        async def initial_calibration(conn: aiosqlite.Connection, device_id: str) -> None:
            for metric, offset in registration.initial_offsets.items():
                await write_calibration(
                    conn,
                    CalibrationRecord(
                        device_id=device_id,
                        metric=metric,
                        performed_by=principal.user_id,
                        performed_by_email=principal.email,
                        method="agent_offset",
                        points=[],
                        slope=1.0,
                        offset=offset,
                        message=f"{metric}_offset given in calibration_data at registration",
                        activate=True,
                    ),
                )

        try:
            device_id = await self._devices.create(registration.columns, initial_calibration)
        except DuplicateDevice as err:
            raise Conflict(
                "Another device already uses this " + err.field.removeprefix("address."),
                {"field": err.field},
            ) from None
        except sqlite3.IntegrityError:  # the farm was deleted since it was authorized
            raise NotFound("Farm not found") from None
        log.info(
            "device %s registered on farm %s by %s", device_id, fields["farm_id"], principal.user_id
        )
        await self._notify_bound(device_id)
        return device_id

    # Views -------------------------------------------------------------------------------------

    async def _device(self, device_id: str) -> Device:
        row = await self._devices.get(device_id)
        if row is None:
            raise NotFound("Device not found")
        view = device_view(row, await self._calibrations.active(device_id), self.profile_of(row))
        return self._with_link(view)

    async def _active_by_device(self, rows: list[sqlite3.Row]) -> dict[str, list[sqlite3.Row]]:
        active: dict[str, list[sqlite3.Row]] = {row["id"]: [] for row in rows}
        for calibration in await self._calibrations.active_of_devices(list(active)):
            active[calibration["device_id"]].append(calibration)
        return active

    async def _visible(
        self, principal: Principal, where: DeviceFilter, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        if where.farm_id is not None:
            await self.authorize_farm(principal, where.farm_id, Action.READ)
        return await self._devices.list_visible(principal, where, limit, offset)

    async def detail(self, principal: Principal, device_id: str) -> Device:
        """One device with every registry field."""
        await self.device_for(principal, device_id, Action.READ)
        return await self._device(device_id)

    async def list_devices(self, principal: Principal, query: DeviceListQuery) -> DeviceList:
        """Visible devices of every kind."""
        where = DeviceFilter(
            _text(query.farm_id),
            query.kind,
            query.device_type,
            query.status,
            location=query.location,
            search=query.q,
            sort=query.sort,
        )
        rows, total = await self._visible(principal, where, query.limit, query.offset)
        active = await self._active_by_device(rows)
        devices = [
            self._with_link(device_view(row, active[row["id"]], self.profile_of(row)))
            for row in rows
        ]
        return DeviceList(devices=devices, total=total, limit=query.limit, offset=query.offset)

    async def list_sensor_devices(
        self, principal: Principal, query: SensorDeviceQuery
    ) -> SensorDeviceList:
        """Visible sensor devices as /sensor-devices shows them."""
        where = DeviceFilter(_text(query.farm_id), "sensor", query.device_type, query.status)
        rows, total = await self._visible(principal, where, query.limit, query.offset)
        active = await self._active_by_device(rows)
        devices = [sensor_device_view(row, active[row["id"]]) for row in rows]
        return SensorDeviceList(
            devices=devices, total=total, limit=query.limit, offset=query.offset
        )

    async def list_fans(self, principal: Principal, query: FanListQuery) -> FanList:
        """Visible fans as /fans shows them."""
        # running/stopped are derived from reported state, so that filter is applied here.
        derived = query.status in ("running", "stopped")
        status = "online" if derived else query.status
        where = DeviceFilter(_text(query.farm_id), "fan", None, status)
        if not derived:
            rows, total = await self._visible(principal, where, query.limit, query.offset)
            now = self._now()
            fans = [fan_view(row, now) for row in rows]
            return FanList(fans=fans, total=total, limit=query.limit, offset=query.offset)
        rows, _ = await self._visible(principal, where, -1, 0)
        now = self._now()
        fans = [fan_view(row, now) for row in rows]
        matching = [fan for fan in fans if fan.status == query.status]
        page = matching[query.offset : query.offset + query.limit]
        return FanList(fans=page, total=len(matching), limit=query.limit, offset=query.offset)

    # Changes -----------------------------------------------------------------------------------

    async def set_status(
        self, principal: Principal, device_id: str, body: DeviceStatusUpdate
    ) -> Device:
        """Put a device in maintenance, disable it, or make it active again."""
        row = await self.device_for(principal, device_id, Action.MANAGE)
        await self._devices.set_admin_status(device_id, body.status)
        was_disabled = row["admin_status"] == "disabled"
        if body.status == "disabled" and not was_disabled:
            await self._notify_unbound(device_id)
        elif body.status != "disabled" and was_disabled:
            await self._notify_bound(device_id)
        return await self._device(device_id)

    async def update(self, principal: Principal, device_id: str, body: DeviceUpdate) -> Device:
        """Rename a device or change where it is."""
        await self.device_for(principal, device_id, Action.MANAGE)
        await self._devices.rename(device_id, body.name, body.location)
        return await self._device(device_id)

    def profile_list(self) -> DeviceProfileList:
        """Every loaded firmware profile, for choosing one when adding a device."""
        profiles = [
            DeviceProfile(
                id=p.id,
                name=p.name,
                firmware=p.firmware,
                kind=p.kind,
                device_type=p.device_type,
                transport=p.transport,
                variables=dict(p.variables),
                metrics=[DeviceProfileMetric(name=m.name, unit=m.unit) for m in p.metrics],
                commands=sorted(p.commands),
            )
            for p in (self.profiles[key] for key in self.profiles)
        ]
        return DeviceProfileList(profiles=profiles, total=len(profiles))

    async def delete(self, principal: Principal, device_id: str) -> None:
        """Remove a device and its calibration history."""
        await self.device_for(principal, device_id, Action.MANAGE)
        if await self._devices.delete(device_id):
            log.info("device %s deleted by %s", device_id, principal.user_id)
            await self._notify_unbound(device_id)

    # Runtime -----------------------------------------------------------------------------------

    async def bindings(self) -> list[DeviceBinding]:
        """Every device the runtime should talk to: with a profile and not disabled."""
        return [
            binding
            for binding in map(self._binding, await self._devices.bindable())
            if binding is not None
        ]

    async def binding(self, device_id: str) -> DeviceBinding | None:
        """One device's binding, or None if it has no profile, is disabled or is gone."""
        row = await self._devices.get(device_id)
        if row is None or row["admin_status"] == "disabled":
            return None
        return self._binding(row)

    def _binding(self, row: sqlite3.Row) -> DeviceBinding | None:
        profile_id = row["profile"]
        if profile_id is None:
            return None
        if profile_id not in self.profiles:
            # A profile file removed since registration: the device stays listed, unbound.
            log.warning("device %s: firmware profile %s is not loaded", row["id"], profile_id)
            return None
        return DeviceBinding(
            device_id=row["id"],
            farm_id=row["farm_id"],
            kind=row["kind"],
            profile=self.profiles[profile_id],
            topic_base=row["topic_base"],
            variables=json.loads(row["topic_variables"]),
            serial_port=row["serial_port"],
            serial_overrides=json.loads(row["serial_settings"]),
        )

    def profile_of(self, row: sqlite3.Row) -> FirmwareProfile | None:
        """The loaded profile of a device row, if it has one."""
        profile_id = row["profile"]
        return self.profiles.get(profile_id) if profile_id is not None else None

    async def reset_availability(self) -> None:
        """Mark every device offline until it reports; call before binding at start-up."""
        await self._devices.reset_availability()

    async def record_availability(self, device_id: str, online: bool, at: datetime) -> None:
        """An availability change observed by the runtime (LWT, status topic, silence, port)."""
        await self._devices.set_availability(device_id, online, iso(at))

    async def record_states(
        self, device_id: str, states: Mapping[str, bool | int], at: datetime
    ) -> None:
        """Actuator state the device reported (power, fan_speed, brightness, valve)."""
        await self._devices.record_state(device_id, states, iso(at))

    async def record_info(
        self,
        device_id: str,
        *,
        firmware_version: str | None = None,
        battery_level: int | None = None,
    ) -> None:
        """What the device said about itself (e.g. EZO ``i`` firmware); None keeps a field."""
        if battery_level is not None and not 0 <= battery_level <= 100:
            raise ValueError(f"battery level {battery_level} outside 0..100")
        await self._devices.record_info(device_id, firmware_version, battery_level)

    async def _notify_bound(self, device_id: str) -> None:
        binding = await self.binding(device_id)
        if binding is None:
            return
        for listener in self._listeners:
            try:
                await listener.device_bound(binding)
            except Exception:  # the registry change stands; the runtime logs and retries
                log.exception("device %s: binding it failed", device_id)

    async def _notify_unbound(self, device_id: str) -> None:
        for listener in self._listeners:
            try:
                await listener.device_unbound(device_id)
            except Exception:
                log.exception("device %s: unbinding it failed", device_id)


def _text(value: object | None) -> str | None:
    return None if value is None else str(value)
