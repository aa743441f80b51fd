"""Agent-side gateway with simulated Tasmota/ESPHome/generic devices on a real Mosquitto."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys

import pytest

from agent.devices.codec import Command, DeviceCodec, OutgoingMessage
from agent.devices.mqtt import InboundMessage, MqttClient
from agent.devices.profiles import ProfileRegistry
from agent.devices.simulator.mqtt import SimulatedMqttDevice
from tests.agent.devices.conftest import WAIT, Agent, eventually, settings_for
from tests.support.mosquitto import Mosquitto


def _simulator(
    profiles: ProfileRegistry, profile_id: str, base: str, broker: Mosquitto
) -> SimulatedMqttDevice:
    return SimulatedMqttDevice(
        profiles[profile_id], base, host=broker.host, port=broker.port, autopublish=False
    )


@pytest.mark.parametrize(
    ("profile_id", "values"),
    [
        ("tasmota-sht3x", {"temperature": 24.5, "humidity": 61.2}),
        ("tasmota-dht22", {"temperature": 19.8, "humidity": 70.4}),
        ("esphome-sensor", {"temperature": 22.25, "humidity": 55.0}),
        ("generic-json", {"co2": 845.0, "temperature": 21.5, "humidity": 48.0}),
    ],
)
async def test_simulated_sensor_readings_reach_the_agent(
    agent: Agent,
    broker: Mosquitto,
    profiles: ProfileRegistry,
    profile_id: str,
    values: dict[str, float],
) -> None:
    await agent.gateway.add("sensor-1", DeviceCodec(profiles[profile_id], "bench-1"))
    async with _simulator(profiles, profile_id, "bench-1", broker) as device:
        await device.wait_ready(WAIT)
        for metric, value in values.items():
            device.set_reading(metric, value)
        await device.publish_telemetry()
        await eventually(
            lambda: all(
                agent.sink.values("sensor-1", m)[-1:] == [pytest.approx(v, abs=0.051)]
                for m, v in values.items()
            )
        )
        assert agent.sink.online("sensor-1") is True
    for metric, value in values.items():
        # ESPHome also publishes its states on connect; the last value is the one set.
        assert agent.sink.values("sensor-1", metric)[-1] == pytest.approx(value, abs=0.051)
    assert agent.gateway.stats.malformed == 0
    assert agent.gateway.stats.rejected == {}


@pytest.mark.parametrize(
    ("profile_id", "command", "state"),
    [
        ("tasmota-relay", Command("power", True), {"power": True}),
        ("tasmota-relay", Command("valve", False), {"valve": False}),
        ("tasmota-dimmer", Command("brightness", 40), {"brightness": 40, "power": True}),
        ("tasmota-dimmer", Command("brightness", 0), {"power": False}),
        ("tasmota-ifan", Command("fan_speed", 50), {"fan_speed": 67}),
        ("tasmota-ifan", Command("fan_speed", 0), {"fan_speed": 0}),
        ("esphome-fan", Command("fan_speed", 40), {"fan_speed": 40, "power": True}),
        ("esphome-fan", Command("fan_speed", 0), {"power": False}),
        ("esphome-fan", Command("power", True), {"power": True}),
    ],
)
async def test_commands_are_confirmed_by_the_devices_state_report(
    agent: Agent,
    broker: Mosquitto,
    profiles: ProfileRegistry,
    profile_id: str,
    command: Command,
    state: dict[str, bool | int],
) -> None:
    await agent.gateway.add("act-1", DeviceCodec(profiles[profile_id], "act-1"))
    async with _simulator(profiles, profile_id, "act-1", broker) as device:
        await device.wait_ready(WAIT)
        await eventually(lambda: agent.sink.online("act-1") is True)
        result = await agent.gateway.send("act-1", command, timeout=WAIT)
        assert result.outcome == "confirmed"
        assert dict(result.expected) == state
        for field, value in state.items():
            assert result.observed[field] == value
            assert device.state[field] == value


async def test_fan_command_round_trip_changes_the_device_repeatedly(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    await agent.gateway.add("fan", DeviceCodec(profiles["esphome-fan"], "exhaust"))
    async with _simulator(profiles, "esphome-fan", "exhaust", broker) as device:
        await device.wait_ready(WAIT)
        for percent in (30, 75, 0, 100):
            result = await agent.gateway.send("fan", Command("fan_speed", percent), timeout=WAIT)
            assert result.outcome == "confirmed", percent
        assert device.state == {"power": True, "fan_speed": 100}


async def test_command_refused_by_the_firmware_is_rejected(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    async def refuse(message: InboundMessage) -> None:
        await device.publish(OutgoingMessage("stat/odd/RESULT", '{"Command":"Error"}', 0, False))

    device = MqttClient(settings_for(broker), refuse)
    await agent.gateway.add("odd", DeviceCodec(profiles["tasmota-dimmer"], "odd"))
    async with device:
        await device.wait_connected(WAIT)
        await device.subscribe(["cmnd/odd/#"])
        result = await agent.gateway.send("odd", Command("brightness", 55), timeout=WAIT)
    assert (result.outcome, result.detail) == ("rejected", "Error")


async def test_command_to_an_absent_device_times_out(
    agent: Agent, profiles: ProfileRegistry
) -> None:
    await agent.gateway.add("ghost", DeviceCodec(profiles["tasmota-relay"], "ghost"))
    result = await agent.gateway.send("ghost", Command("power", True), timeout=0.3)
    assert (result.outcome, dict(result.observed)) == ("timed_out", {})


async def test_last_will_marks_devices_offline_when_their_process_dies(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    await agent.gateway.add("t1", DeviceCodec(profiles["tasmota-sht3x"], "proc-1"))
    await agent.gateway.add("e1", DeviceCodec(profiles["esphome-sensor"], "proc-2"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent.devices.simulator",
        "--port",
        str(broker.port),
        "--period",
        "0.2",
        "--device",
        "tasmota-sht3x:proc-1",
        "--device",
        "esphome-sensor:proc-2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        listed = [(await process.stdout.readline()).decode().split() for _ in range(2)]
        assert listed == [["tasmota-sht3x", "proc-1"], ["esphome-sensor", "proc-2"]]
        await eventually(
            lambda: (
                bool(agent.sink.values("t1", "temperature"))
                and bool(agent.sink.values("e1", "humidity"))
            )
        )
        assert agent.sink.online("t1") is True and agent.sink.online("e1") is True
    finally:
        process.kill()
        await process.wait()
    # The broker publishes each device's retained last will once the TCP connection drops.
    await eventually(lambda: agent.sink.online("t1") is False and agent.sink.online("e1") is False)
    assert {c.reason for c in agent.sink.changes if not c.online} == {"status"}


async def test_silent_device_goes_offline_and_comes_back(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    await agent.gateway.add("co2", DeviceCodec(profiles["generic-json"], "node-7"))
    async with _simulator(profiles, "generic-json", "node-7", broker) as device:
        await device.wait_ready(WAIT)
        await device.publish_telemetry()
        await eventually(lambda: agent.sink.online("co2") is True)
        agent.clock.advance(119)
        assert await agent.gateway.expire() == []
        agent.clock.advance(2)
        [change] = await agent.gateway.expire()
        assert (change.device_id, change.online, change.reason) == ("co2", False, "silence")
        await device.publish_telemetry()
        await eventually(lambda: agent.sink.online("co2") is True)


async def test_bad_payload_storm_is_counted_not_stored_and_does_not_stall_ingest(
    agent: Agent,
    broker: Mosquitto,
    profiles: ProfileRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await agent.gateway.add("sht", DeviceCodec(profiles["tasmota-sht3x"], "storm"))
    await agent.gateway.add("esp", DeviceCodec(profiles["esphome-sensor"], "storm-esp"))
    await agent.client.subscribe(["tele/+/SENSOR"])  # also hears devices nobody registered
    caplog.set_level(logging.WARNING, logger="agent.devices")
    bad = [
        ("tele/storm/SENSOR", b'{"SHT3X":{"Temperature":23.4,'),
        ("tele/storm/SENSOR", b"\xff\xfe\x00garbage"),
        ("tele/storm/SENSOR", b'{"SHT3X":{"Temperature":NaN,"Humidity":null},"TempUnit":"C"}'),
        ("tele/storm/SENSOR", b'{"SHT3X":{"Temperature":900,"Humidity":-5},"TempUnit":"C"}'),
        ("storm-esp/sensor/temperature/state", b"nan"),
        ("storm-esp/sensor/humidity/state", b"lots"),
        ("tele/stranger/SENSOR", b'{"SHT3X":{"Temperature":20}}'),
    ]
    rounds = 150
    async with _simulator(profiles, "tasmota-sht3x", "storm", broker) as device:
        await device.wait_ready(WAIT)
        for i in range(rounds):
            for topic, payload in bad:
                await device.client.publish(
                    OutgoingMessage(topic, payload.decode("latin-1"), 0, False)
                )
            device.set_reading("temperature", 20 + i / 100)
            device.set_reading("humidity", 50.0)
            await device.publish_telemetry()
        await eventually(lambda: len(agent.sink.values("sht", "temperature")) == rounds)
    stats = agent.gateway.stats
    # Every valid reading arrived, in order; nothing from the storm was stored.
    assert agent.sink.values("sht", "temperature") == pytest.approx(
        [20 + i / 100 for i in range(rounds)], abs=0.051
    )
    assert agent.sink.values("esp", "temperature") == []
    assert agent.sink.values("esp", "humidity") == []
    assert all(math.isfinite(m.value) for _, m in agent.sink.readings)
    assert stats.malformed == 3 * rounds
    assert stats.unknown_topic == rounds
    assert stats.rejected == {"not_a_number": 3 * rounds, "out_of_range": 2 * rounds}
    # Rate-limited: one line per problem kind and device/metric, not one per bad message.
    assert len(caplog.records) <= 10


async def test_retained_readings_are_not_taken_for_new_ones(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    async with _simulator(profiles, "esphome-sensor", "old-node", broker) as device:
        await device.wait_ready(WAIT)
        # ESPHome retains its states; the agent subscribes later and gets them as a replay.
        await device.client.publish(
            OutgoingMessage("old-node/sensor/temperature/state", "18.0", 1, True)
        )
        await agent.gateway.add("esp", DeviceCodec(profiles["esphome-sensor"], "old-node"))
        # The retained birth and the retained state arrive in the order of their subscriptions:
        # wait for both.
        await eventually(
            lambda: agent.gateway.stats.retained_skipped >= 1 and agent.sink.online("esp") is True
        )
        assert agent.sink.values("esp", "temperature") == []
        device.set_reading("temperature", 19.5)
        await device.publish_telemetry()
        await eventually(lambda: agent.sink.values("esp", "temperature") == [19.5])


async def test_devices_sharing_a_node_share_its_status_topic(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    await agent.gateway.add("climate", DeviceCodec(profiles["esphome-sensor"], "tent"))
    await agent.gateway.add("fan", DeviceCodec(profiles["esphome-fan"], "tent"))
    await agent.gateway.remove("climate")
    async with _simulator(profiles, "esphome-fan", "tent", broker) as device:
        await device.wait_ready(WAIT)
        await eventually(lambda: agent.sink.online("fan") is True)
        await device.publish_raw("tent/status", "offline")
        await eventually(lambda: agent.sink.online("fan") is False)
    assert agent.sink.online("climate") is None


async def test_streaming_continues_across_a_broker_crash(
    agent: Agent, broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    await agent.gateway.add("sht", DeviceCodec(profiles["tasmota-sht3x"], "crashy"))
    device = SimulatedMqttDevice(
        profiles["tasmota-sht3x"], "crashy", host=broker.host, port=broker.port, period=0.05
    )
    async with device:
        await eventually(lambda: len(agent.sink.values("sht", "temperature")) >= 3)
        await broker.restart(kill=True)
        before = len(agent.sink.values("sht", "temperature"))
        await eventually(lambda: len(agent.sink.values("sht", "temperature")) >= before + 3)
    assert agent.client.stats.connects == 2
    assert agent.gateway.stats.malformed == 0


async def test_simulated_tasmota_payload_looks_like_the_real_one(
    broker: Mosquitto, profiles: ProfileRegistry
) -> None:
    seen: list[InboundMessage] = []

    async def record(message: InboundMessage) -> None:
        seen.append(message)

    async with MqttClient(settings_for(broker), record) as watcher:
        await watcher.wait_connected(WAIT)
        await watcher.subscribe(["tele/look/#"])
        async with _simulator(profiles, "tasmota-sht3x", "look", broker) as device:
            await device.wait_ready(WAIT)
            await device.publish_telemetry()
            await eventually(lambda: any(m.topic == "tele/look/SENSOR" for m in seen))
        await eventually(
            lambda: [m.payload for m in seen if m.topic == "tele/look/LWT"][-1:] == [b"Offline"]
        )
    sensor = next(m for m in seen if m.topic == "tele/look/SENSOR")
    document = json.loads(sensor.payload)
    assert list(document) == ["Time", "SHT3X", "TempUnit"]
    assert set(document["SHT3X"]) == {"Temperature", "Humidity", "DewPoint"}
    assert document["TempUnit"] == "C"
    lwt = [m.payload for m in seen if m.topic == "tele/look/LWT"]
    assert lwt[0] == b"Online" and lwt[-1] == b"Offline"
