"""The live side of the device registry: MQTT and serial devices bound, heard and commanded.

``DeviceRuntime`` binds every device ``DeviceService.bindings()`` returns (and follows the
registry as devices are registered, disabled or deleted through the API), and is the sink of
both transports: readings go to the ``ReadingWriter`` (which applies the active calibration),
availability, reported state and firmware go to the registry, and each change is offered to the
``on_event`` hook the WebSocket streams use. The agent serves while the broker is away: the
MQTT client reconnects with back-off and ``mqtt_state()`` tells /healthz.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from agent.devices.availability import AvailabilityChange
from agent.devices.codec import Command, Measurement, StateUpdate
from agent.devices.errors import DeviceUnavailable
from agent.devices.gateway import CommandResult, MqttDeviceGateway
from agent.devices.mqtt import InboundMessage, MessageHandler, MqttClient, MqttSettings
from agent.devices.mqtt_split import SplitTransport, without_backpressure
from agent.services.devices.registry import DeviceBinding, DeviceService
from agent.services.ingest.modbus_devices import ModbusDevices
from agent.services.ingest.serial_devices import SerialDevices, SerialOptions, SerialReports
from agent.services.live.device_events import DeviceEvent, DeviceEventHook, EventKind
from agent.services.readings.writer import ReadingWriter, incoming, to_ms
from protocol.timefmt import utcnow

__all__ = ["DeviceRuntime", "MqttState"]

log = logging.getLogger(__name__)

MqttState = Literal["connected", "disconnected", "disabled"]


class DeviceRuntime:
    """Binds registered devices to their transports and records what they report."""

    def __init__(
        self,
        devices: DeviceService,
        writer: ReadingWriter,
        *,
        mqtt: MqttSettings | None,
        serial: SerialOptions | None,
        on_event: DeviceEventHook | None = None,
        expiry_interval: float = 5.0,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        self._devices = devices
        self._writer = writer
        self._on_event = on_event
        self._expiry_interval = expiry_interval
        self.serial: SerialDevices | None = None
        if serial is not None:
            reports = SerialReports(
                measurements=self.measurements,
                availability=self.serial_availability,
                fault=self.serial_fault,
                firmware=self.serial_firmware,
                busy=serial.busy,
                now=utcnow,
            )
            self.serial = SerialDevices(reports, serial)
        self.modbus = ModbusDevices(self, utcnow)
        self.client: MqttClient | None = None
        """The telemetry connection (it carries the agent's birth and will)."""
        self.control: MqttClient | None = None
        """The connection of state reports, commands and other listeners' topics."""
        self._transport: SplitTransport | None = None
        self.gateway: MqttDeviceGateway | None = None
        # Topics other services listen to on the devices' connection (exact topics).
        self._listeners: dict[str, MessageHandler] = {}
        self._connect_hooks: list[Callable[[], Awaitable[None]]] = []
        if mqtt is not None:
            self.client = MqttClient(
                mqtt,
                self._handle,
                barrier=writer,
                on_connect=self._connected,
                in_step_with_commits=True,
            )
            control = replace(mqtt, client_id=f"{mqtt.client_id}-control", will=None, birth=None)
            self.control = MqttClient(control, self._handle, barrier=without_backpressure(writer))
            self.control.prioritize = lambda _topic: True
            self._transport = SplitTransport(self.client, self.control, self._urgent)
            self.gateway = MqttDeviceGateway(self._transport, self, now=utcnow)
            # A topic that became urgent after it was subscribed stays on the telemetry
            # connection: there it still overtakes the telemetry waiting in the agent.
            self.client.prioritize = self._urgent
            self.client.busy = busy
        self._bindings: dict[str, DeviceBinding] = {}
        self._states: dict[str, dict[str, bool | int]] = {}
        self._started = False

    # Lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind every registered device, then connect (in the background) and start polling."""
        await self._devices.reset_availability()
        self._devices.add_listener(self)
        self._devices.set_link_source(self._link)
        for binding in await self._devices.bindings():
            await self._bind(binding)
        if self.client is not None and self.control is not None and self.gateway is not None:
            await self.control.start()
            await self.client.start()
            await self.gateway.start(self._expiry_interval)
        self._started = True
        log.info(
            "device runtime started: %d devices, MQTT %s",
            len(self._bindings),
            "enabled" if self.client else "disabled",
        )

    async def stop(self) -> None:
        """Close the serial ports and the broker connection."""
        self._started = False
        if self.serial is not None:
            await self.serial.close()
        await self.modbus.close()
        if self.gateway is not None:
            await self.gateway.stop()
        if self.client is not None:
            await self.client.stop()
        if self.control is not None:
            await self.control.stop()

    def _link(self, device_id: str) -> dict[str, int] | None:
        stats = self.modbus.link(device_id)
        if stats is None:
            return None
        return {
            "polls": stats.polls,
            "answered": stats.answered,
            "timeouts": stats.timeouts,
            "crc_errors": stats.crc_errors,
            "exceptions": stats.exceptions,
            "connection_errors": stats.connection_errors,
            "consecutive_failures": stats.consecutive_failures,
        }

    def mqtt_state(self) -> MqttState:
        """The broker connections as /healthz reports them: connected when both are."""
        if self.client is None or self.control is None:
            return "disabled"
        both = self.client.connected and self.control.connected
        return "connected" if both else "disconnected"

    # RegistryListener --------------------------------------------------------------------------

    async def device_bound(self, binding: DeviceBinding) -> None:
        """A device was registered or re-enabled through the API."""
        await self._bind(binding)

    async def device_unbound(self, device_id: str) -> None:
        """A device was deleted or disabled through the API."""
        self._bindings.pop(device_id, None)
        self._states.pop(device_id, None)
        if self.gateway is not None:
            await self.gateway.remove(device_id)
        if self.serial is not None:
            await self.serial.remove(device_id)
        await self.modbus.remove(device_id)

    async def _bind(self, binding: DeviceBinding) -> None:
        transport = binding.profile.transport
        if transport == "mqtt" and binding.topic_base is not None:
            if self.gateway is None:
                log.debug("device %s: MQTT disabled, not bound", binding.device_id)
                return
            self._bindings[binding.device_id] = binding
            await self.gateway.add(binding.device_id, binding.mqtt_codec())
        elif transport == "serial" and binding.serial_port is not None:
            if self.serial is None:
                log.debug("device %s: serial disabled, not bound", binding.device_id)
                return
            self._bindings[binding.device_id] = binding
            await self.serial.add(binding)
        elif transport == "modbus" and binding.serial_port is not None:
            self._bindings[binding.device_id] = binding
            await self.modbus.add(binding)

    # Commands ----------------------------------------------------------------------------------

    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult:  # noqa: ASYNC109
        """Send a command and wait for the device's confirmation; the outcome is an event.

        Raises DeviceUnavailable when the device is not bound to a running MQTT connection,
        ValueError when its firmware has no such command.
        """
        if device_id in self.modbus:
            result = await self.modbus.send(device_id, command, timeout)
        elif self.gateway is None or device_id not in self._bindings:
            raise DeviceUnavailable(f"device {device_id} is not connected to the agent")
        else:
            result = await self.gateway.send(device_id, command, timeout)
        kind: EventKind = (
            "error" if result.outcome in ("timed_out", "rejected") else "status-update"
        )
        self._emit(
            kind,
            device_id,
            {
                "event": "command",
                "command": command.kind,
                "value": command.value,
                "outcome": result.outcome,
                "detail": result.detail,
            },
        )
        log.info("device %s: %s=%s %s", device_id, command.kind, command.value, result.outcome)
        return result

    # DeviceEventSink (MQTT) and serial reports -------------------------------------------------

    async def measurements(
        self, device_id: str, measurements: Sequence[Measurement], received_at: datetime
    ) -> None:
        """Queue decoded readings for the writer (never waits)."""
        binding = self._bindings.get(device_id)
        if binding is None:
            return
        profile = binding.profile
        received_ms = to_ms(received_at)
        for measurement in measurements:
            try:
                spec = profile.metric(measurement.metric)
                valid: tuple[float, float] | None = (spec.min, spec.max)
            except KeyError:
                valid = None
            self._writer.submit(incoming(device_id, measurement, received_ms, valid))

    async def states(
        self, device_id: str, states: Sequence[StateUpdate], received_at: datetime
    ) -> None:
        """Record reported actuator state; a change is an event."""
        reported = {state.field: state.value for state in states}
        await self._devices.record_states(device_id, reported, received_at)
        known = self._states.setdefault(device_id, {})
        changed = {key: value for key, value in reported.items() if known.get(key) != value}
        known.update(reported)
        if changed:
            self._emit("status-update", device_id, {"event": "state", "state": dict(known)})

    async def availability(self, change: AvailabilityChange) -> None:
        """Record an MQTT device going online or offline."""
        await self._set_availability(change.device_id, change.online, change.reason)

    async def serial_availability(self, device_id: str, online: bool) -> None:
        """Record a serial device going online or offline."""
        await self._set_availability(device_id, online, "poll")

    async def modbus_availability(self, device_id: str, online: bool) -> None:
        """Record a Modbus device going online (it answered) or offline (polls failed)."""
        await self._set_availability(device_id, online, "poll")

    async def modbus_fault(self, device_id: str, message: str) -> None:
        """A Modbus device stopped answering or answered nonsense."""
        self._emit("error", device_id, {"event": "fault", "message": message})

    async def serial_fault(self, device_id: str, message: str) -> None:
        """A serial device stopped answering or answered nonsense."""
        self._emit("error", device_id, {"event": "fault", "message": message})

    async def serial_firmware(self, device_id: str, firmware: str) -> None:
        """A serial device told its firmware version."""
        await self._devices.record_info(device_id, firmware_version=firmware)

    async def _set_availability(self, device_id: str, online: bool, reason: str) -> None:
        if device_id not in self._bindings:
            return
        await self._devices.record_availability(device_id, online, utcnow())
        status = "online" if online else "offline"
        self._emit(
            "status-update",
            device_id,
            {"event": "availability", "status": status, "reason": reason},
        )

    def _emit(self, kind: EventKind, device_id: str, data: dict[str, Any]) -> None:
        binding = self._bindings.get(device_id)
        if self._on_event is None or binding is None:
            return
        event = DeviceEvent(kind, device_id, binding.farm_id, data, utcnow())
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not stop recording
            log.exception("device event hook failed")

    # Other services on the same connection ---------------------------------------------------

    async def listen(self, topics: Iterable[str], handler: MessageHandler) -> None:
        """Hand messages on ``topics`` (exact topics) to ``handler`` instead of the devices.

        The handler runs in the connection's dispatch order: it must not wait long.
        """
        new = [topic for topic in topics if topic not in self._listeners]
        for topic in new:
            self._listeners[topic] = handler
        if self._transport is not None:
            await self._transport.subscribe(new)

    async def unlisten(self, topics: Iterable[str]) -> None:
        """Stop handing messages on ``topics`` to their listener."""
        gone = [topic for topic in topics if self._listeners.pop(topic, None) is not None]
        if self._transport is not None:
            await self._transport.unsubscribe(gone)

    @property
    def listening(self) -> frozenset[str]:
        """The topics handed to listeners other than the devices."""
        return frozenset(self._listeners)

    def on_connect(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``hook`` after every (re)connect to the broker."""
        self._connect_hooks.append(hook)

    async def _connected(self) -> None:
        for hook in tuple(self._connect_hooks):
            try:
                await hook()
            except Exception:  # one hook must not keep the connection from serving devices
                log.exception("MQTT connect hook failed")

    def _urgent(self, topic: str) -> bool:
        """Devices' state reports (they confirm commands) and the other listeners' topics (Home
        Assistant's commands) are handled before telemetry waiting in the queue."""
        return topic in self._listeners or (
            self.gateway is not None and self.gateway.reports_state(topic)
        )

    async def _handle(self, message: InboundMessage) -> None:
        listener = self._listeners.get(message.topic)
        if listener is not None:
            await listener(message)
            return
        assert self.gateway is not None
        await self.gateway.handle(message)
