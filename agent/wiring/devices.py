"""The device runtime: MQTT gateway, serial polling and, on demand, simulated devices."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from aiohttp import web

from agent.devices.mqtt import MqttSettings
from agent.ops.instance_id import instance_id, mqtt_client_id
from agent.services.calibration.runtime import EzoDevices
from agent.services.ingest.device_runtime import DeviceRuntime
from agent.services.ingest.serial_devices import SerialOptions
from agent.settings import AgentSettings
from agent.store.farms import FarmStore
from agent.store.readings import ReadingStore
from agent.store.users import UserStore
from agent.web.keys import (
    CALIBRATION,
    DATABASE,
    DEVICE_RUNTIME,
    DEVICES,
    EVENT_FANOUT,
    EVENT_LOG,
    FOREGROUND,
    HEALTH,
    READINGS,
)
from agent.wiring.context import CleanupContext
from agent.wiring.events import fan_out
from integrations.home_assistant.agent_side.discovery_wiring import agent_status_messages

__all__ = ["device_runtime_context"]


def device_runtime_context(settings: AgentSettings) -> CleanupContext:
    """Connect to the devices for the application's lifetime."""

    async def device_runtime(app: web.Application) -> AsyncIterator[None]:
        simulation = None
        runtime: DeviceRuntime | None = None
        # Everything opened so far is closed again when the start-up is cancelled half-way (a
        # stop asked meanwhile): simulators, the private broker and the connections included.
        try:
            mqtt_host, mqtt_port = settings.mqtt_host, settings.mqtt_port
            if settings.simulate_devices:
                # Imported only for the demo: the simulators are code a farm's agent never
                # runs, and a Raspberry Pi should not keep them resident.
                from agent.services.devices.simulation import DeviceSimulation

                simulation = DeviceSimulation(
                    settings.state_dir / "simulation",
                    app[DEVICES].profiles,
                    client_prefix=f"sim-{instance_id(settings.state_dir)[:12]}",
                )
                if settings.mqtt_enabled:
                    named = {"mqtt_host", "mqtt_port"} & settings.model_fields_set
                    mqtt_host, mqtt_port = await simulation.start_broker(
                        mqtt_host, mqtt_port, shared=bool(named)
                    )
                if settings.serial_enabled:
                    await simulation.start_serial()
            runtime = _runtime(app, settings, mqtt_host, mqtt_port)
            await runtime.start()
            app[DEVICE_RUNTIME] = runtime
            app[HEALTH].watch_mqtt(runtime.mqtt_state)
            if simulation is not None:
                await simulation.register(
                    app[DEVICES], FarmStore(app[DATABASE]), UserStore(app[DATABASE])
                )
                # A week for the charts, on the run that registered the devices.
                await simulation.seed_history(ReadingStore(app[DATABASE]), int(time.time() * 1000))
                if settings.mqtt_enabled:
                    await simulation.start_mqtt()
            yield
        finally:  # in the reverse order of the start
            if simulation is not None:
                await simulation.stop_mqtt()
            if runtime is not None:
                await runtime.stop()
            if simulation is not None:
                await simulation.stop_serial()
                await simulation.stop_broker()

    return device_runtime


def _runtime(
    app: web.Application, settings: AgentSettings, mqtt_host: str, mqtt_port: int
) -> DeviceRuntime:
    """The device runtime over the broker at ``mqtt_host:mqtt_port`` and the serial ports."""
    password = settings.mqtt_password
    birth, will = agent_status_messages(settings)
    mqtt = MqttSettings(
        birth=birth,
        will=will,
        host=mqtt_host,
        port=mqtt_port,
        client_id=mqtt_client_id(settings),
        username=settings.mqtt_username,
        password=password.get_secret_value() if password is not None else None,
    )
    ezo = EzoDevices()
    calibration = app[CALIBRATION]
    serial = SerialOptions(
        interval=settings.serial_poll_interval_s, ezo=ezo, busy=calibration.in_progress
    )
    calibration.attach(ezo=ezo)
    return DeviceRuntime(
        app[DEVICES],
        app[READINGS].writer,
        mqtt=mqtt if settings.mqtt_enabled else None,
        serial=serial if settings.serial_enabled else None,
        # The WebSocket streams connect here (DeviceEvent per availability, state, command
        # outcome and fault); the event log keeps those worth keeping.
        on_event=fan_out(app[EVENT_FANOUT].publish_device_event, app[EVENT_LOG].device_event),
        busy=app[FOREGROUND].busy,
    )
