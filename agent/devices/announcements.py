"""What device ecosystems announce over MQTT, turned into Found candidates.

One decoder per ecosystem, each following the ecosystem's documented payloads:

- Tasmota: ``tasmota/discovery/<MAC>/config`` (``t`` topic, ``dn`` name, ``md`` module, ``rl``
  relays, ``lt_st`` light subtype) and ``.../sensors`` (``sn``: the tele SENSOR payload)
  (https://tasmota.github.io/docs/Home-Assistant/ and tasmota/tasmota_support/support_tasmota.ino
  ``TasDiscoverMessage``).
- ESPHome: its Home Assistant MQTT discovery, ``homeassistant/<component>/<node>/<object_id>/
  config`` with abbreviated keys (``stat_t``, ``dev_cla``, ``dev.sw`` = "esphome v...")
  (https://esphome.io/components/mqtt/ "discovery").
- zigbee2mqtt: the retained ``<base_topic>/bridge/devices`` list; each device's ``exposes``
  map generically onto the zigbee2mqtt profiles
  (https://www.zigbee2mqtt.io/guide/usage/mqtt_topics_and_messages.html#zigbee2mqtt-bridge-devices,
  https://www.zigbee2mqtt.io/guide/usage/exposes.html).
- Shelly Gen2/Gen3: ``<prefix>/online`` "true" is answered with a ``Shelly.GetDeviceInfo`` RPC on
  ``<prefix>/rpc`` (reply on ``<src>/rpc``); ``shellies/announce`` carries the same object
  (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Mqtt,
  https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Shelly#shellygetdeviceinfo).

Readings "heard so far" come from the proposed profile itself: ``watch`` gives, per candidate,
the profile's codec bound to the proposed address; its messages decode as the registered device's
will.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.devices.codec import DeviceCodec, OutgoingMessage
from agent.devices.errors import PayloadError
from agent.devices.found import Candidate
from agent.devices.profiles import ProfileRegistry

__all__ = ["SUBSCRIPTIONS", "AnnouncementDecoder", "Heard", "zigbee2mqtt_profile"]

log = logging.getLogger(__name__)

#: Topic filters the decoder listens to (plus each candidate's own topics, see ``watch``).
SUBSCRIPTIONS = (
    "tasmota/discovery/+/config",
    "tasmota/discovery/+/sensors",
    "homeassistant/+/+/+/config",
    "+/bridge/devices",
    "+/online",
    "shellies/announce",
)

_MAX_PAYLOAD = 512 * 1024  # bridge/devices of a big Zigbee network
_TOPIC_BASE = re.compile(r"^[^/+#\x00\s]([^+#\x00\s]*[^/+#\x00\s])?$")
_Z2M_METRICS = frozenset(
    {"temperature", "humidity", "co2", "illuminance", "illuminance_lux", "soil_moisture"}
)
_ESPHOME_SENSOR_CLASSES = {"temperature": "temperature", "humidity": "humidity"}
_TASMOTA_FULL_TOPIC = "%prefix%/%topic%/"
_TASMOTA_PREFIXES = ["cmnd", "stat", "tele"]


@dataclass
class Heard:
    """What one message told: candidates to announce and requests to publish."""

    candidates: list[Candidate] = field(default_factory=list)
    requests: list[OutgoingMessage] = field(default_factory=list)


def zigbee2mqtt_profile(exposes: Iterable[Mapping[str, Any]]) -> str | None:
    """The zigbee2mqtt profile for a device's ``exposes``: a dimmable light, a switch (plug,
    relay), or a sensor of temperature, humidity, CO2, illuminance or soil moisture; else None."""
    kinds: dict[str, set[str]] = {}
    for expose in exposes:
        if not isinstance(expose, Mapping):
            continue
        features = expose.get("features")
        names = {
            str(item.get("property", item.get("name")))
            for item in (features if isinstance(features, list) else [expose])
            if isinstance(item, Mapping)
        }
        kinds.setdefault(str(expose.get("type")), set()).update(names)
    if {"state", "brightness"} <= kinds.get("light", set()):
        return "zigbee2mqtt-light"
    if "state" in kinds.get("switch", set()):
        return "zigbee2mqtt-plug"
    if _Z2M_METRICS & {name for names in kinds.values() for name in names}:
        return "zigbee2mqtt-sensor"
    return None


class AnnouncementDecoder:
    """Turns announcement messages into candidates; keeps what spans several messages."""

    def __init__(self, profiles: ProfileRegistry, rpc_source: str) -> None:
        self._profiles = profiles
        self._rpc_source = rpc_source
        self.reply_topic = f"{rpc_source}/rpc"
        self._tasmota: dict[str, dict[str, Any]] = {}
        self._esphome_nodes: dict[tuple[str, str], dict[str, str]] = {}
        self._shelly_asked: dict[int, str] = {}
        self._next_rpc = 1

    def subscriptions(self) -> tuple[str, ...]:
        """Every topic filter to listen to."""
        return (*SUBSCRIPTIONS, self.reply_topic)

    def watch(self, candidate: Candidate) -> DeviceCodec | None:
        """The proposed profile's codec at the proposed address (its messages are readings)."""
        address = candidate.address
        if candidate.profile_id is None or address.get("transport") != "mqtt":
            return None
        profile = self._profiles.get(candidate.profile_id)
        if profile is None:
            return None
        try:
            return DeviceCodec(profile, str(address["topic_base"]), address.get("variables"))
        except ValueError:
            return None

    def decode(self, topic: str, payload: bytes, retained: bool = False) -> Heard:
        """What a message on one of ``subscriptions()`` announces; never raises on bad input."""
        if len(payload) > _MAX_PAYLOAD:
            return Heard()
        try:
            text = payload.decode("utf-8")
            parts = topic.split("/")
            if parts[:2] == ["tasmota", "discovery"] and len(parts) == 4:
                return self._tasmota_message(parts[2], parts[3], _json_object(text))
            if parts[0] == "homeassistant" and len(parts) == 5 and parts[4] == "config":
                return self._esphome(parts[1], parts[2], parts[3], text)
            if len(parts) == 3 and parts[1:] == ["bridge", "devices"]:
                return self._zigbee2mqtt(parts[0], json.loads(text))
            if topic == "shellies/announce":
                return self._shelly_info(None, _json_object(text))
            if topic == self.reply_topic:
                return self._shelly_reply(_json_object(text))
            if len(parts) == 2 and parts[1] == "online" and text.strip() == "true":
                return self._shelly_online(parts[0])
        except (UnicodeDecodeError, ValueError, RecursionError, PayloadError) as err:
            log.debug("announcement on %s not understood: %s", topic, err)
        return Heard()

    # Tasmota -----------------------------------------------------------------------------------

    def _tasmota_message(self, mac: str, which: str, document: dict[str, Any]) -> Heard:
        known = self._tasmota.setdefault(mac, {})
        if which == "config":
            known["config"] = document
        elif which == "sensors":
            sensors = document.get("sn")
            known["sensors"] = sensors if isinstance(sensors, dict) else {}
        else:
            return Heard()
        config = known.get("config")
        if not isinstance(config, dict) or not isinstance(config.get("t"), str):
            return Heard()
        sensors = known.get("sensors") or {}
        profile, kind = _tasmota_profile(config, sensors)
        if (
            config.get("ft", _TASMOTA_FULL_TOPIC) != _TASMOTA_FULL_TOPIC
            or config.get("tp", _TASMOTA_PREFIXES) != _TASMOTA_PREFIXES
        ):
            profile = None  # a custom FullTopic or prefixes: no shipped profile's topics fit
        base = config["t"]
        if not _TOPIC_BASE.match(base):
            return Heard()
        candidate = Candidate(
            source="tasmota",
            key=str(config.get("mac") or mac),
            profile_id=profile,
            address={"transport": "mqtt", "topic_base": base},
            name=str(config.get("dn") or config.get("hn") or base),
            model=str(config.get("md") or ""),
            kind=kind,
        )
        readings: dict[str, float] = {}
        codec = self.watch(candidate)
        if codec is not None and sensors:
            sensor_topic = codec.topic("tele/{base}/SENSOR")
            if sensor_topic in codec.subscriptions():
                decoded = codec.decode(sensor_topic, json.dumps(sensors).encode())
                readings = {m.metric: m.value for m in decoded.measurements}
        return Heard([_with_readings(candidate, readings)])

    # ESPHome -----------------------------------------------------------------------------------

    def _esphome(self, component: str, node: str, object_id: str, text: str) -> Heard:
        if not text.strip():
            return Heard()  # a removed entity
        document = _json_object(text)
        device = document.get("dev", document.get("device"))
        software = (
            str(device.get("sw", device.get("sw_version", ""))) if isinstance(device, dict) else ""
        )
        if not software.lower().startswith("esphome"):
            return Heard()  # another firmware's (or this agent's own) Home Assistant discovery
        state_topic = str(document.get("stat_t", document.get("state_topic", "")))
        tilde = document.get("~")
        if isinstance(tilde, str):  # Home Assistant's abbreviation of a topic's base
            if state_topic.startswith("~"):
                state_topic = tilde + state_topic[1:]
            elif state_topic.endswith("~"):
                state_topic = state_topic[:-1] + tilde
        marker = f"/{component}/{object_id}/"
        if marker not in state_topic:
            return Heard()
        base = state_topic.split(marker)[0]
        if not _TOPIC_BASE.match(base):
            return Heard()
        name = str(device.get("name") or node) if isinstance(device, dict) else node
        if component == "fan":
            candidate = Candidate(
                source="esphome",
                key=f"{node}:fan:{object_id}",
                profile_id="esphome-fan",
                address={"transport": "mqtt", "topic_base": base, "variables": {"fan": object_id}},
                name=name,
                model=software,
            )
            return Heard([candidate])
        if component != "sensor":
            return Heard()
        device_class = str(document.get("dev_cla", document.get("device_class", "")))
        variable = _ESPHOME_SENSOR_CLASSES.get(device_class)
        if variable is None:
            return Heard()
        variables = self._esphome_nodes.setdefault((node, base), {})
        variables[variable] = object_id
        candidate = Candidate(
            source="esphome",
            key=f"{node}:sensor",
            profile_id="esphome-sensor",
            address={"transport": "mqtt", "topic_base": base, "variables": dict(variables)},
            name=name,
            model=software,
        )
        return Heard([candidate])

    # zigbee2mqtt -------------------------------------------------------------------------------

    def _zigbee2mqtt(self, base_topic: str, devices: Any) -> Heard:
        if not isinstance(devices, list):
            raise ValueError("bridge/devices is not a list")
        heard = Heard()
        for device in devices:
            if not isinstance(device, dict) or device.get("type") == "Coordinator":
                continue
            if device.get("disabled") or device.get("supported") is False:
                continue
            definition = device.get("definition")
            exposes = definition.get("exposes") if isinstance(definition, dict) else None
            name = device.get("friendly_name")
            ieee = device.get("ieee_address")
            if not isinstance(exposes, list) or not isinstance(name, str) or not ieee:
                continue
            profile = zigbee2mqtt_profile(exposes)
            topic_base = f"{base_topic}/{name}"
            if profile is None or not _TOPIC_BASE.match(topic_base) or len(topic_base) > 128:
                continue
            assert isinstance(definition, dict)
            model = " ".join(
                str(definition[key]) for key in ("vendor", "model") if definition.get(key)
            )
            heard.candidates.append(
                Candidate(
                    source="zigbee2mqtt",
                    key=str(ieee),
                    profile_id=profile,
                    address={"transport": "mqtt", "topic_base": topic_base},
                    name=name,
                    model=model,
                )
            )
        return heard

    # Shelly ------------------------------------------------------------------------------------

    def _shelly_online(self, prefix: str) -> Heard:
        if prefix in self._shelly_asked.values() or not _TOPIC_BASE.match(prefix):
            return Heard()
        request_id = self._next_rpc
        self._next_rpc += 1
        self._shelly_asked[request_id] = prefix
        request = {"id": request_id, "src": self._rpc_source, "method": "Shelly.GetDeviceInfo"}
        message = OutgoingMessage(f"{prefix}/rpc", json.dumps(request), 1, False)
        return Heard(requests=[message])

    def _shelly_reply(self, document: dict[str, Any]) -> Heard:
        request_id = document.get("id")
        prefix = self._shelly_asked.get(request_id) if isinstance(request_id, int) else None
        result = document.get("result")
        if prefix is None or not isinstance(result, dict):
            return Heard()
        return self._shelly_info(prefix, result)

    def _shelly_info(self, prefix: str | None, info: dict[str, Any]) -> Heard:
        device_id = info.get("id")
        generation = info.get("gen")
        if not isinstance(device_id, str) or not isinstance(generation, int) or generation < 2:
            return Heard()  # Gen1 devices speak another MQTT API
        base = prefix or device_id  # the default topic prefix is the device id
        if not _TOPIC_BASE.match(base):
            return Heard()
        model = " ".join(str(info[key]) for key in ("app", "model") if info.get(key))
        candidate = Candidate(
            source="shelly",
            key=device_id,
            profile_id="shelly-switch",
            address={"transport": "mqtt", "topic_base": base},
            name=str(info.get("name") or device_id),
            model=model,
        )
        return Heard([candidate])


def _tasmota_profile(
    config: Mapping[str, Any], sensors: Mapping[str, Any]
) -> tuple[str | None, str | None]:
    """The shipped Tasmota profile that fits a discovery config and its sensors, and the kind."""
    module = str(config.get("md") or "").lower()
    relays = config.get("rl") if isinstance(config.get("rl"), list) else []
    if "ifan" in module:
        return "tasmota-ifan", "fan"
    if config.get("lt_st") == 1:
        return "tasmota-dimmer", "light"
    if relays and relays[0] == 1 and not any(relays[1:]):
        return "tasmota-relay", None
    if "SHT3X" in sensors:
        return "tasmota-sht3x", "sensor"
    if "AM2301" in sensors or "DHT22" in sensors:
        return "tasmota-dht22", "sensor"
    return None, "sensor"


def _with_readings(candidate: Candidate, readings: Mapping[str, float]) -> Candidate:
    if not readings:
        return candidate
    clean = {k: v for k, v in readings.items() if math.isfinite(v)}
    return Candidate(
        source=candidate.source,
        key=candidate.key,
        profile_id=candidate.profile_id,
        address=candidate.address,
        name=candidate.name,
        readings=clean,
        model=candidate.model,
        kind=candidate.kind,
    )


def _json_object(text: str) -> dict[str, Any]:
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return document
