"""Simulated MQTT devices built from the firmware profiles.

A ``SimulatedMqttDevice`` connects like the real firmware (last will and birth on its status
topic), publishes telemetry and periodic state in the profile's payload shapes, and answers
commands with state reports the way Tasmota and ESPHome do. Used by tests, benchmarks and the
README demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from agent.devices.codec import OutgoingMessage, level_to_percent, percent_to_level
from agent.devices.errors import DeviceUnavailable
from agent.devices.mqtt import InboundMessage, MqttClient, MqttSettings
from agent.devices.profiles import (
    SWITCH_FIELDS,
    FirmwareProfile,
    MessageSpec,
    MetricSpec,
    StateSpec,
    placeholders,
    render,
)
from farmkit.tasks import cancel_and_wait

__all__ = ["SimulatedMqttDevice"]

log = logging.getLogger(__name__)

# Magnus formula coefficients (Sensirion application note "Dew-point calculation").
_MAGNUS_B, _MAGNUS_C = 17.62, 243.12


class SimulatedMqttDevice:
    """One simulated device on its own MQTT connection, like the real hardware.

    ``period`` replaces the firmware's publishing interval (the demo uses seconds, not Tasmota's
    300 s); with ``autopublish=False`` nothing is published periodically (tests drive it).
    ``client_id`` defaults to one made of the profile and the topic base.
    """

    def __init__(
        self,
        profile: FirmwareProfile,
        base: str,
        *,
        host: str = "127.0.0.1",
        port: int = 1883,
        variables: Mapping[str, str] | None = None,
        period: float | None = None,
        autopublish: bool = True,
        rng: random.Random | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        client_id: str | None = None,
    ) -> None:
        if profile.transport != "mqtt":
            raise ValueError(f"profile {profile.id} is not an MQTT profile")
        self.profile = profile
        self.base = base
        self.values: dict[str, str] = {**profile.variables, **(variables or {}), "base": base}
        self._period = period
        self._autopublish = autopublish
        self._rng = rng or random.Random()
        self._now = now
        self.readings: dict[str, float] = {m.name: _start_value(m) for m in profile.metrics}
        self.state: dict[str, bool | int] = {field: False for field in profile.state_fields}
        for field in profile.state_fields - SWITCH_FIELDS:
            self.state[field] = 0
        self.commands_received = 0
        availability = profile.availability
        status = (
            render(availability.topic, self.values)
            if availability is not None and availability.topic is not None
            else None
        )
        will = birth = None
        if availability is not None and status is not None:
            offline, online = availability.offline, availability.online
            if availability.path is not None:  # zigbee2mqtt: {"state":"online"}
                offline = json.dumps({availability.path: offline}, separators=(",", ":"))
                online = json.dumps({availability.path: online}, separators=(",", ":"))
            will = OutgoingMessage(status, offline, availability.qos, True)
            birth = OutgoingMessage(status, online, availability.qos, True)
        self.client = MqttClient(
            MqttSettings(
                host=host,
                port=port,
                client_id=client_id or f"sim-{profile.id}-{base}",
                persistent_session=False,
                subscribe_qos=1,
                backoff_initial=0.2,
                backoff_max=2.0,
                will=will,
                birth=birth,
            ),
            self._on_message,
            on_connect=self._announce,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._announced = asyncio.Event()

    def topic(self, template: str) -> str:
        """Render a profile topic for this device."""
        return render(template, self.values)

    async def start(self) -> None:
        """Connect, subscribe to the command topics and start periodic publishing."""
        command_topics = {
            self.topic(message.topic)
            for spec in self.profile.commands.values()
            for message in spec.messages
        }
        await self.client.subscribe(sorted(command_topics))
        await self.client.start()
        if not self._autopublish:
            return
        for message in self.profile.messages:
            if message.interval_s is None:
                continue  # published on change (command replies), not periodically
            period = self._period or message.interval_s
            name = f"sim-{self.base}-{message.topic}"
            self._tasks.append(asyncio.create_task(self._every(period, message), name=name))

    async def stop(self) -> None:
        """Stop publishing and disconnect (publishing "offline" like a clean shutdown)."""
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        await self.client.stop()

    async def __aenter__(self) -> SimulatedMqttDevice:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def wait_ready(self, timeout: float) -> None:  # noqa: ASYNC109
        """Wait until connected and the on-connect state announcement has been published."""
        async with asyncio.timeout(timeout):
            await self._announced.wait()

    def set_reading(self, metric: str, value: float) -> None:
        """Force the next reported value of a metric (NaN and out-of-range allowed)."""
        self.profile.metric(metric)
        self.readings[metric] = value

    async def publish_telemetry(self) -> None:
        """Publish every periodic message once (telemetry and periodic state)."""
        for message in self.profile.messages:
            if message.interval_s is not None:
                await self._publish_message(message, None)

    async def publish_raw(self, topic: str, payload: bytes | str, qos: int = 0) -> None:
        """Publish anything on any topic (bad payload storms in tests)."""
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
        await self.client.publish(OutgoingMessage(topic, text, qos, False))

    async def _every(self, period: float, message: MessageSpec) -> None:
        # Stagger devices so a fleet does not publish in lock-step.
        await asyncio.sleep(self._rng.uniform(0, period))
        while True:
            if message.metrics:
                self._drift()
            # Broker away: the client reconnects; like the firmware, skip this period.
            with contextlib.suppress(DeviceUnavailable):
                await self._publish_message(message, None)
            await asyncio.sleep(period)

    async def _announce(self) -> None:
        """After connecting, ESPHome publishes every (retained) state; Tasmota its STATE."""
        self._announced.clear()
        for message in self.profile.messages:
            if message.retain or (message.states and message.interval_s is not None):
                await self._publish_message(message, None)
        self._announced.set()

    def _drift(self) -> None:
        for metric in self.profile.metrics:
            value = self.readings[metric.name]
            if not math.isfinite(value) or not metric.min <= value <= metric.max:
                self.readings[metric.name] = _start_value(metric)
                continue
            centre = _start_value(metric)
            spread = _spread(metric)
            step = self._rng.gauss(0, spread / 5) + (centre - value) * 0.1
            self.readings[metric.name] = min(metric.max, max(metric.min, value + step))
        if {"temperature", "humidity", "dew_point"} <= self.readings.keys():
            self.readings["dew_point"] = _dew_point(
                self.readings["temperature"], self.readings["humidity"]
            )

    async def _publish_message(self, message: MessageSpec, fields: set[str] | None) -> None:
        """Publish one message spec; ``fields`` limits the state fields it carries."""
        payload = self._payload(message, fields)
        if payload is not None:
            topic = self.topic(message.topic)
            await self.client.publish(OutgoingMessage(topic, payload, message.qos, message.retain))

    def _payload(self, message: MessageSpec, fields: set[str] | None) -> str | None:
        states = [s for s in message.states if fields is None or s.field in fields]
        if message.format == "plain":
            if message.metrics:
                metric = message.metrics[0]
                return _format(self.readings[metric.name], metric.decimals)
            return _state_value(states[0], self.state[states[0].field]) if states else None
        if not states and not message.metrics:
            return None
        document: dict[str, Any] = {}
        if message.time_path is not None:
            stamp = self._now().astimezone(UTC)
            _put(document, message.time_path, _time_value(message, stamp))
        for metric in message.metrics:
            value = self.readings[metric.name]
            number: float | None = round(value, metric.decimals) if math.isfinite(value) else None
            _put(document, metric.path[0], number)
            if metric.unit_path is not None:
                token = next((k for k, v in metric.unit_values.items() if v == metric.unit), None)
                _put(document, metric.unit_path, token or metric.unit)
        for state in states:
            _put(document, state.path[0], _state_json(state, self.state[state.field]))
        return json.dumps(document, separators=(",", ":"))

    async def _on_message(self, message: InboundMessage) -> None:
        """Apply a command like the firmware does, then report the new state."""
        self.commands_received += 1
        text = message.payload.decode("utf-8", "replace").strip()
        if self.profile.firmware == "shelly" and await self._shelly_rpc(text):
            return
        touched: set[str] = set()
        error = False
        for kind, spec in self.profile.commands.items():
            for sent in spec.messages:
                if self.topic(sent.topic) != message.topic:
                    continue
                names = placeholders(sent.payload)
                if kind in SWITCH_FIELDS and "switch" in names:
                    switched = _switch_in(sent.payload, spec.on, spec.off, text)
                    if switched is not None:
                        self.state[kind] = switched
                        touched.add(kind)
                    elif not sent.payload.startswith("{"):
                        error = True
                elif names & {"level", "percent"}:
                    level = _level_in(sent.payload, text)
                    if level is None and sent.payload.startswith("{"):
                        continue  # another command's JSON on the same topic
                    top = spec.levels or 100
                    if level is None or not 0 <= level <= top:
                        error = True
                        continue
                    percent = level_to_percent(level, spec.levels) if spec.levels else level
                    touched.add(kind)
                    # A JSON command (zigbee2mqtt {"state":"ON","brightness":N}) switches on too.
                    couples_power = sent.payload.startswith("{") or not any(
                        m.when == "on" for m in spec.messages
                    )
                    if spec.zero_turns_off and couples_power and "power" in self.state:
                        self.state["power"] = percent > 0
                        touched.add("power")
                    if percent > 0 or not spec.zero_turns_off or not couples_power:
                        self.state[kind] = percent
        if error:
            await self._report_error()
        if touched:
            await self._report(touched)

    async def _shelly_rpc(self, text: str) -> bool:
        """Answer Shelly.GetDeviceInfo on <src>/rpc like a Gen2 device (how it is found)."""
        try:
            request = json.loads(text)
        except json.JSONDecodeError:
            return False
        if not isinstance(request, dict) or request.get("method") != "Shelly.GetDeviceInfo":
            return False
        mac = "".join(f"{byte:02X}" for byte in self.base.encode()[-6:].rjust(6, b"\0"))
        info = {
            "id": self.base,
            "mac": mac,
            "model": "SNSW-001P16EU",
            "gen": 2,
            "fw_id": "20231107-164738/1.0.8-g8c7bb8d",
            "ver": "1.0.8",
            "app": "Plus1PM",
            "auth_en": False,
            "auth_domain": None,
        }
        reply = {
            "id": request.get("id"),
            "src": self.base,
            "dst": request.get("src"),
            "result": info,
        }
        topic = f"{request.get('src')}/rpc"
        await self.client.publish(OutgoingMessage(topic, json.dumps(reply), 1, False))
        return True

    async def _report(self, touched: set[str]) -> None:
        for message in self.profile.messages:
            if message.interval_s is None and {s.field for s in message.states} & touched:
                await self._publish_message(message, touched)

    async def _report_error(self) -> None:
        for message in self.profile.messages:
            if message.error_path is not None and message.error_values:
                payload = json.dumps({message.error_path: message.error_values[-1]})
                topic = self.topic(message.topic)
                await self.client.publish(OutgoingMessage(topic, payload, message.qos, False))
                return


def _start_value(metric: MetricSpec) -> float:
    if metric.typical is not None:
        return metric.typical
    return (metric.min + metric.max) / 2


def _spread(metric: MetricSpec) -> float:
    return max(abs(_start_value(metric)) * 0.05, (metric.max - metric.min) * 0.005)


def _dew_point(celsius: float, humidity: float) -> float:
    gamma = math.log(max(humidity, 1.0) / 100) + _MAGNUS_B * celsius / (_MAGNUS_C + celsius)
    return _MAGNUS_C * gamma / (_MAGNUS_B - gamma)


def _format(value: float, decimals: int) -> str:
    if not math.isfinite(value):
        return "nan"  # what ESPHome's value_accuracy_to_string prints for NaN
    return f"{value:.{decimals}f}"


def _time_value(message: MessageSpec, stamp: datetime) -> str | int:
    if message.time_format == "epoch_s":
        return int(stamp.timestamp())
    if message.time_format == "epoch_ms":
        return int(stamp.timestamp() * 1000)
    # Tasmota's format: local time without an offset; the simulated device runs on UTC.
    return stamp.strftime("%Y-%m-%dT%H:%M:%S")


def _state_value(spec: StateSpec, value: bool | int) -> str:
    if spec.field in SWITCH_FIELDS:
        return spec.on if value else spec.off
    return str(percent_to_level(int(value), spec.levels) if spec.levels else int(value))


def _state_json(spec: StateSpec, value: bool | int) -> str | int | bool:
    if spec.field in SWITCH_FIELDS:
        if (spec.on, spec.off) == ("true", "false"):
            return bool(value)  # a JSON boolean (Shelly's "output")
        return spec.on if value else spec.off
    return percent_to_level(int(value), spec.levels) if spec.levels else int(value)


def _put(document: dict[str, Any], path: str, value: object) -> None:
    node = document
    *parents, leaf = path.split(".")
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            return
        node = child
    node[leaf] = value


def _switch_in(template: str, on: str, off: str, text: str) -> bool | None:
    """True/False if ``text`` is the command payload ``template`` rendered with the on/off
    token (``{switch}`` alone, or inside JSON like zigbee2mqtt's and Shelly's), else None."""
    folded = text.casefold()
    for token, value in ((on, True), (off, False)):
        if render(template, {"switch": token}).casefold() == folded:
            return value
    return None


def _level_in(template: str, text: str) -> int | None:
    """The level in ``text`` if it is ``template`` with ``{level}``/``{percent}`` filled in."""
    pattern = re.escape(template)
    for name in ("level", "percent"):
        pattern = pattern.replace(re.escape("{" + name + "}"), r"(-?\d+)")
    match = re.fullmatch(pattern, text)
    return _int(match.group(1)) if match else None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
