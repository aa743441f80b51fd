"""The demo's live devices: simulated firmwares on the first farm, run inside the agent.

``farm-agent run --sample-data --simulate`` uses this: a private Mosquitto on a free port
unless a broker is named (``FARM_MQTT_HOST`` / ``FARM_MQTT_PORT``), a Tasmota SHT3x, an
ESPHome sensor and a Tasmota fan over MQTT, EZO pH and EC circuits on pseudo-terminals, and an
RS-485 Modbus bus (a temperature/humidity sensor, a CO2 sensor and a fan on a VFD) on another.
The devices are registered (once) on the oldest farm as its first admin would, so every API
view and GET /sensors/{id}/data shows them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.devices.broker_process import MosquittoProcess
from agent.devices.codec import OutgoingMessage
from agent.devices.errors import DeviceUnavailable
from agent.devices.profiles import ProfileRegistry
from agent.devices.simulator.ezo import EzoSimulator
from agent.devices.simulator.history import history
from agent.devices.simulator.modbus import ModbusRtuSimulator, SimulatedModbusDevice
from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.devices.simulator.zigbee2mqtt import bridge_devices
from agent.services.devices.registry import DeviceService
from agent.store.farms import FarmStore
from agent.store.readings import NewReading, ReadingStore
from agent.store.users import UserStore
from protocol.errors import ApiError
from protocol.identity import Principal, Role
from protocol.schemas.devices import DeviceCreate

__all__ = ["DeviceSimulation", "SimulatedDevice"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimulatedDevice:
    """One demo device: its registration and, for MQTT, its topic base."""

    name: str
    kind: str
    profile: str
    location: str
    topic_base: str | None = None
    ezo: str | None = None
    """"ph" or "ec" for a serial EZO circuit."""
    modbus_unit: int | None = None
    """The unit id of a device on the simulated RS-485 Modbus bus."""
    found: bool = False
    """Not registered: it announces itself and waits under Found for a person to add it."""


DEMO_DEVICES = (
    # Locations name the sample farm's racks, so the web app's overview shows their readings
    # on those racks' shelves.
    SimulatedDevice(
        "Rack A1 climate", "sensor", "tasmota-sht3x", "Rack A1", topic_base="demo-row1"
    ),
    SimulatedDevice(
        "Rack B1 climate", "sensor", "esphome-sensor", "Rack B1", topic_base="demo-row2"
    ),
    SimulatedDevice("Exhaust fan", "fan", "tasmota-ifan", "Exhaust", topic_base="demo-fan"),
    SimulatedDevice("Tank pH", "sensor", "atlas-ezo-ph", "Nutrient tank", ezo="ph"),
    SimulatedDevice("Tank EC", "sensor", "atlas-ezo-ec", "Nutrient tank", ezo="ec"),
    SimulatedDevice("Rack B1 CO2", "sensor", "modbus-senseair-s8", "Rack B1", modbus_unit=104),
    SimulatedDevice(
        "Germination climate", "sensor", "modbus-xy-md02", "Germination", modbus_unit=1
    ),
    SimulatedDevice("Intake fan", "fan", "modbus-vfd-fan", "Intake", modbus_unit=7),
    # Announced (zigbee2mqtt's bridge/devices, Shelly's online + Shelly.GetDeviceInfo), not
    # registered: the devices screen lists them under Found.
    SimulatedDevice(
        "climate_rack_a2",
        "sensor",
        "zigbee2mqtt-sensor",
        "",
        topic_base="zigbee2mqtt/climate_rack_a2",
        found=True,
    ),
    SimulatedDevice(
        "Pump plug",
        "pump",
        "shelly-switch",
        "",
        topic_base="shellyplus1pm-d4d4da6e1c20",
        found=True,
    ),
)


class DeviceSimulation:
    """Starts the broker if needed, the simulators, and registers their devices."""

    def __init__(
        self,
        workdir: Path,
        profiles: ProfileRegistry,
        *,
        client_prefix: str = "sim",
        period: float = 5.0,
        devices: tuple[SimulatedDevice, ...] = DEMO_DEVICES,
    ) -> None:
        self._workdir = workdir
        self._profiles = profiles
        self._client_prefix = client_prefix
        """Starts the simulators' MQTT client ids: the agent's own, so two demos differ."""
        self._period = period
        self._devices = devices
        self.broker: MosquittoProcess | None = None
        self.host = "127.0.0.1"
        self.port = 1883
        self._ezo: dict[str, EzoSimulator] = {}
        self._modbus: ModbusRtuSimulator | None = None
        self._mqtt: list[SimulatedMqttDevice] = []
        self._new: list[tuple[str, SimulatedDevice]] = []
        """The devices this run registered (device id), whose history is still to be made."""

    async def start_broker(self, host: str, port: int, *, shared: bool) -> tuple[str, int]:
        """The broker to use: a private Mosquitto on a free port, or with ``shared`` (the user
        named a broker) the one at ``host:port``.

        A broker shared by chance (one answering on 1883) mixed two demos' devices, whose
        topics are the same."""
        if shared:
            self.host, self.port = host, port
            return host, port
        self.broker = MosquittoProcess(self._workdir / "mosquitto")
        await self.broker.start()
        self.host, self.port = self.broker.host, self.broker.port
        log.info("simulated devices on a private broker at %s:%d", self.host, self.port)
        return self.host, self.port

    async def start_serial(self) -> None:
        """Plug the simulated EZO circuits in (before the runtime opens their ports)."""
        self._workdir.mkdir(parents=True, exist_ok=True)  # no private broker may have made it
        for device in self._devices:
            if device.ezo is not None and device.ezo not in self._ezo:
                link = self._workdir / f"ttyEZO-{device.ezo}"
                simulator = EzoSimulator(
                    "ph" if device.ezo == "ph" else "ec",
                    link,
                    rng=random.Random(),
                    continuous=False,
                )
                await simulator.start()
                self._ezo[device.ezo] = simulator
        on_bus = [
            SimulatedModbusDevice(device.modbus_unit, self._profiles[device.profile], drift=True)
            for device in self._devices
            if device.modbus_unit is not None
        ]
        if on_bus and self._modbus is None:
            self._modbus = ModbusRtuSimulator(on_bus, self._workdir / "ttyRS485")
            await self._modbus.start()

    def ezo_simulator(self, kind: str) -> EzoSimulator:
        """The simulated EZO circuit of ``kind`` ("ph" or "ec"), once plugged in."""
        return self._ezo[kind]

    async def register(self, devices: DeviceService, farms: FarmStore, users: UserStore) -> int:
        """Register the demo devices on the oldest farm (skipping those already there)."""
        admins, _ = await users.list("admin", "active", 1, 0)
        if not admins:
            log.warning("no active admin: simulated devices not registered")
            return 0
        admin = admins[0]
        principal = Principal(user_id=admin["id"], email=admin["email"], role=Role.ADMIN)
        rows, total = await farms.list(principal, None, 500, 0)
        if total == 0:
            log.warning("no farm to put the simulated devices on (use --sample-data)")
            return 0
        farm_id = rows[-1]["id"]  # newest first: the last is the oldest farm
        created = 0
        for device in self._devices:
            if device.modbus_unit is not None and self._modbus is None:
                continue  # serial ports off: no RS-485 bus
            if device.found:
                continue
            body = DeviceCreate.model_validate(
                {
                    "name": device.name,
                    "kind": device.kind,
                    "farm_id": farm_id,
                    "location": device.location,
                    "profile": device.profile,
                    "address": self._address(device),
                }
            )
            try:
                registered = await devices.register(principal, body)
                created += 1
                self._new.append((registered.id, device))
            except ApiError as err:  # registered by an earlier run: same topic or port
                log.debug("simulated device %s not registered: %s", device.name, err)
        log.info("simulated devices on farm %s: %d new", farm_id, created)
        return created

    async def seed_history(
        self, readings: ReadingStore, now_ms: int, *, days: int = 7, step_s: int = 300
    ) -> int:
        """A past of ``days`` for the sensors this run registered, a reading every ``step_s``,
        stored as the devices' own readings are (their rollups included); how many."""
        rng = random.Random()
        start = now_ms - days * 86_400_000
        end = now_ms - step_s * 1000  # the live readings take over from here
        stored = 0
        for device_id, device in self._new:
            if device.kind != "sensor":
                continue
            for metric in self._profiles[device.profile].metrics:
                batch = [
                    NewReading(device_id, metric.name, metric.unit, ts, value)
                    for ts, value in history(metric, start, end, step_s * 1000, rng)
                ]
                stored += len((await readings.write(batch)).inserted)
        self._new = []
        log.info("simulated devices: %d readings of the past %d days", stored, days)
        return stored

    def _address(self, device: SimulatedDevice) -> dict[str, Any]:
        if device.ezo is not None:
            return {"transport": "serial", "port": str(self._ezo[device.ezo].path)}
        if device.modbus_unit is not None and self._modbus is not None:
            port = str(self._modbus.path)
            # One line for the whole bus (the drive's profile says 8N2, the sensors' 8N1).
            line = {"baudrate": 9600, "parity": "N", "stopbits": 1}
            return {"transport": "modbus", "port": port, "unit": device.modbus_unit, **line}
        return {"transport": "mqtt", "topic_base": device.topic_base}

    async def start_mqtt(self) -> None:
        """Connect the simulated MQTT devices; they publish every ``period`` seconds."""
        for device in self._devices:
            if device.topic_base is None:
                continue
            simulator = SimulatedMqttDevice(
                self._profiles[device.profile],
                device.topic_base,
                host=self.host,
                port=self.port,
                period=self._period,
                client_id=f"{self._client_prefix}-{device.profile}-{device.topic_base}",
            )
            await simulator.start()
            self._mqtt.append(simulator)
        await self._zigbee2mqtt_bridge()

    async def _zigbee2mqtt_bridge(self) -> None:
        """Publish zigbee2mqtt's retained device list for the simulated Zigbee devices."""
        zigbee = [
            (simulator, device)
            for simulator, device in zip(
                self._mqtt, (d for d in self._devices if d.topic_base is not None), strict=True
            )
            if self._profiles[device.profile].firmware == "zigbee2mqtt"
        ]
        if not zigbee:
            return
        listed = bridge_devices(
            [(simulator.base.split("/", 1)[1], simulator.profile) for simulator, _ in zigbee]
        )
        message = OutgoingMessage("zigbee2mqtt/bridge/devices", json.dumps(listed), 1, True)
        bridge = zigbee[0][0]
        try:
            await bridge.wait_ready(10)  # a local broker: connected in milliseconds
            await bridge.client.publish(message)
        except (TimeoutError, DeviceUnavailable):
            log.warning("simulated zigbee2mqtt device list not published: broker not reachable")

    async def stop(self) -> None:
        """Stop the simulators, then the private broker."""
        await self.stop_devices()
        await self.stop_broker()

    async def stop_devices(self) -> None:
        """Unplug and disconnect the simulated devices."""
        await self.stop_mqtt()
        await self.stop_serial()

    async def stop_mqtt(self) -> None:
        """Disconnect the simulated MQTT devices."""
        for mqtt in self._mqtt:
            with contextlib.suppress(Exception):
                await mqtt.stop()
        self._mqtt = []

    async def stop_serial(self) -> None:
        """Unplug the simulated EZO circuits (once nothing reads their ports)."""
        for ezo in self._ezo.values():
            await ezo.stop()
        self._ezo = {}
        if self._modbus is not None:
            await self._modbus.stop()
            self._modbus = None

    async def stop_broker(self) -> None:
        """Stop the private broker, if one was started."""
        if self.broker is not None:
            await self.broker.stop()
            self.broker = None
