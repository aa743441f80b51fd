"""Each ecosystem's documented announcement becomes the candidate a person would register."""

from __future__ import annotations

import json

from agent.devices.announcements import AnnouncementDecoder, zigbee2mqtt_profile
from agent.devices.profiles import load_profiles
from agent.settings import DEFAULT_PROFILES_DIR

PROFILES = load_profiles(DEFAULT_PROFILES_DIR)

# zigbee2mqtt/bridge/devices as the zigbee2mqtt docs show it, trimmed to three devices.
Z2M_DEVICES = [
    {
        "ieee_address": "0x00124b00120144ae",
        "type": "Coordinator",
        "friendly_name": "Coordinator",
        "supported": True,
    },
    {
        "ieee_address": "0x00158d0001d82999",
        "type": "EndDevice",
        "friendly_name": "climate_rack_2",
        "supported": True,
        "disabled": False,
        "interview_completed": True,
        "definition": {
            "model": "WSDCGQ11LM",
            "vendor": "Aqara",
            "description": "Temperature and humidity sensor",
            "exposes": [
                {
                    "type": "numeric",
                    "name": "temperature",
                    "property": "temperature",
                    "access": 1,
                    "unit": "°C",
                },
                {
                    "type": "numeric",
                    "name": "humidity",
                    "property": "humidity",
                    "access": 1,
                    "unit": "%",
                },
                {
                    "type": "numeric",
                    "name": "linkquality",
                    "property": "linkquality",
                    "access": 1,
                    "unit": "lqi",
                },
            ],
        },
    },
    {
        "ieee_address": "0x0017880104e45517",
        "type": "Router",
        "friendly_name": "pump_plug",
        "supported": True,
        "definition": {
            "model": "E1603/E1702/E1708",
            "vendor": "IKEA",
            "exposes": [
                {
                    "type": "switch",
                    "features": [
                        {
                            "type": "binary",
                            "name": "state",
                            "property": "state",
                            "access": 7,
                            "value_on": "ON",
                            "value_off": "OFF",
                            "value_toggle": "TOGGLE",
                        }
                    ],
                },
            ],
        },
    },
    {
        "ieee_address": "0x000b57fffec6a5b2",
        "type": "Router",
        "friendly_name": "grow_light",
        "supported": True,
        "definition": {
            "model": "LED1545G12",
            "vendor": "IKEA",
            "exposes": [
                {
                    "type": "light",
                    "features": [
                        {
                            "type": "binary",
                            "name": "state",
                            "property": "state",
                            "access": 7,
                            "value_on": "ON",
                            "value_off": "OFF",
                        },
                        {
                            "type": "numeric",
                            "name": "brightness",
                            "property": "brightness",
                            "access": 7,
                            "value_min": 0,
                            "value_max": 254,
                        },
                    ],
                },
            ],
        },
    },
    {
        "ieee_address": "0x00158d00045b2740",
        "type": "EndDevice",
        "friendly_name": "door_button",
        "supported": True,
        "definition": {
            "model": "WXKG01LM",
            "vendor": "Xiaomi",
            "exposes": [
                {
                    "type": "enum",
                    "name": "action",
                    "property": "action",
                    "access": 1,
                    "values": ["single", "double"],
                }
            ],
        },
    },
]


def decoder() -> AnnouncementDecoder:
    return AnnouncementDecoder(PROFILES, rpc_source="agent-1-discovery")


def test_zigbee2mqtt_devices_map_by_their_exposes_not_their_model() -> None:
    heard = decoder().decode("zigbee2mqtt/bridge/devices", json.dumps(Z2M_DEVICES).encode())

    found = {c.name: (c.profile_id, c.address["topic_base"], c.key) for c in heard.candidates}
    assert found == {
        "climate_rack_2": (
            "zigbee2mqtt-sensor",
            "zigbee2mqtt/climate_rack_2",
            "0x00158d0001d82999",
        ),
        "pump_plug": ("zigbee2mqtt-plug", "zigbee2mqtt/pump_plug", "0x0017880104e45517"),
        "grow_light": ("zigbee2mqtt-light", "zigbee2mqtt/grow_light", "0x000b57fffec6a5b2"),
    }
    # Another model with the same exposes gets the same profile: one mapping, not per model.
    assert zigbee2mqtt_profile([{"type": "numeric", "property": "co2"}]) == "zigbee2mqtt-sensor"
    assert zigbee2mqtt_profile([{"type": "numeric", "property": "soil_moisture"}]) == (
        "zigbee2mqtt-sensor"
    )
    assert zigbee2mqtt_profile([{"type": "enum", "property": "action"}]) is None


def test_a_custom_zigbee2mqtt_base_topic_is_kept_in_the_address() -> None:
    heard = decoder().decode("z2m-barn/bridge/devices", json.dumps(Z2M_DEVICES[1:2]).encode())
    [candidate] = heard.candidates
    assert candidate.address == {"transport": "mqtt", "topic_base": "z2m-barn/climate_rack_2"}


def test_tasmota_discovery_proposes_the_profile_and_reads_the_sensors() -> None:
    config = {
        "ip": "192.168.1.50",
        "dn": "Rack 3 climate",
        "fn": ["Tasmota", None],
        "hn": "rack3-1234",
        "mac": "A4CF12345678",
        "md": "Generic",
        "ty": 0,
        "if": 0,
        "ofln": "Offline",
        "onln": "Online",
        "state": ["OFF", "ON", "TOGGLE", "HOLD"],
        "sw": "13.2.0",
        "t": "rack3_climate",
        "ft": "%prefix%/%topic%/",
        "tp": ["cmnd", "stat", "tele"],
        "rl": [0, 0, 0, 0, 0, 0, 0, 0],
        "swc": [-1] * 8,
        "swn": [None] * 8,
        "btn": [0] * 8,
        "so": {"4": 0, "11": 0, "13": 0, "17": 0, "20": 0, "30": 0, "68": 0, "73": 0},
        "lk": 0,
        "lt_st": 0,
        "sho": [],
        "sht": [],
        "ver": 1,
    }
    sensors = {
        "sn": {
            "Time": "2026-03-01T10:15:00",
            "SHT3X": {"Temperature": 23.4, "Humidity": 55.1, "DewPoint": 13.9},
            "TempUnit": "C",
        },
        "ver": 1,
    }
    topics = decoder()
    first = topics.decode("tasmota/discovery/A4CF12345678/config", json.dumps(config).encode())
    [before] = first.candidates
    assert before.profile_id is None  # which sensor it has comes with /sensors
    heard = topics.decode("tasmota/discovery/A4CF12345678/sensors", json.dumps(sensors).encode())
    [candidate] = heard.candidates
    assert (candidate.profile_id, candidate.name, candidate.key) == (
        "tasmota-sht3x",
        "Rack 3 climate",
        "A4CF12345678",
    )
    assert candidate.address == {"transport": "mqtt", "topic_base": "rack3_climate"}
    assert candidate.readings == {"temperature": 23.4, "humidity": 55.1, "dew_point": 13.9}


def test_a_tasmota_single_relay_is_proposed_as_a_relay() -> None:
    config = {
        "dn": "Pump 1",
        "mac": "A4CF12340001",
        "md": "Sonoff Basic",
        "t": "pump1",
        "rl": [1, 0, 0, 0, 0, 0, 0, 0],
        "lt_st": 0,
    }
    heard = decoder().decode("tasmota/discovery/A4CF12340001/config", json.dumps(config).encode())
    assert [c.profile_id for c in heard.candidates] == ["tasmota-relay"]


def test_esphome_discovery_names_the_node_and_its_sensor_objects() -> None:
    topics = decoder()
    for object_id, device_class in (("rack_temp", "temperature"), ("rack_rh", "humidity")):
        config = {
            "dev_cla": device_class,
            "unit_of_meas": "°C",
            "stat_cla": "measurement",
            "name": object_id,
            "stat_t": f"rack-node/sensor/{object_id}/state",
            "avty_t": "rack-node/status",
            "uniq_id": f"ESPsensor{object_id}",
            "dev": {
                "ids": "a4cf12abcdef",
                "name": "rack-node",
                "sw": "esphome v2024.6.1 Jun 20 2024",
                "mdl": "esp32dev",
                "mf": "espressif",
            },
        }
        heard = topics.decode(
            f"homeassistant/sensor/rack-node/{object_id}/config", json.dumps(config).encode()
        )
    [candidate] = heard.candidates
    assert candidate.profile_id == "esphome-sensor"
    assert candidate.address == {
        "transport": "mqtt",
        "topic_base": "rack-node",
        "variables": {"temperature": "rack_temp", "humidity": "rack_rh"},
    }


def test_home_assistant_discovery_of_other_firmware_is_not_esphome() -> None:
    config = {"stat_t": "farm/sensor/x/state", "dev": {"name": "x", "sw": "farm-agent 1.0"}}
    heard = decoder().decode("homeassistant/sensor/farm/x/config", json.dumps(config).encode())
    assert heard.candidates == []


def test_shelly_online_is_answered_with_get_device_info_and_its_reply_found() -> None:
    topics = decoder()
    heard = topics.decode("shellyplus1pm-a8032ab12345/online", b"true")
    [request] = heard.requests
    assert request.topic == "shellyplus1pm-a8032ab12345/rpc"
    sent = json.loads(request.payload)
    assert sent["method"] == "Shelly.GetDeviceInfo" and sent["src"] == "agent-1-discovery"
    reply = {
        "id": sent["id"],
        "src": "shellyplus1pm-a8032ab12345",
        "dst": "agent-1-discovery",
        "result": {
            "name": None,
            "id": "shellyplus1pm-a8032ab12345",
            "mac": "A8032AB12345",
            "model": "SNSW-001P16EU",
            "gen": 2,
            "fw_id": "20231107-164738/1.0.8-g8c7bb8d",
            "ver": "1.0.8",
            "app": "Plus1PM",
            "auth_en": False,
            "auth_domain": None,
        },
    }
    heard = topics.decode("agent-1-discovery/rpc", json.dumps(reply).encode())
    [candidate] = heard.candidates
    assert (candidate.profile_id, candidate.key, candidate.address["topic_base"]) == (
        "shelly-switch",
        "shellyplus1pm-a8032ab12345",
        "shellyplus1pm-a8032ab12345",
    )
    # Asked once per prefix: a second "online" sends nothing.
    assert topics.decode("shellyplus1pm-a8032ab12345/online", b"true").requests == []


def test_a_gen1_shelly_announce_is_not_proposed() -> None:
    gen1 = {
        "id": "shelly1-B929CC",
        "model": "SHSW-1",
        "mac": "98CDAC1F03CA",
        "ip": "10.0.0.9",
        "new_fw": False,
        "fw_ver": "20210115-103659/v1.9.4@e2732e05",
    }
    assert decoder().decode("shellies/announce", json.dumps(gen1).encode()).candidates == []


def test_garbage_announcements_propose_nothing() -> None:
    topics = decoder()
    for topic, payload in (
        ("zigbee2mqtt/bridge/devices", b"{not json"),
        ("zigbee2mqtt/bridge/devices", b'{"a": 1}'),
        ("tasmota/discovery/X/config", b"\xff\xfe"),
        ("homeassistant/sensor/n/o/config", b"[]"),
        ("agent-1-discovery/rpc", b'{"id": 99, "result": {"gen": 2, "id": "x"}}'),
        ("shellies/announce", b"null"),
    ):
        heard = topics.decode(topic, payload)
        assert heard.candidates == [] and heard.requests == [], topic


def test_a_tasmota_with_a_custom_full_topic_is_found_without_a_profile() -> None:
    config = {"dn": "Odd", "mac": "A4CF12340002", "md": "Sonoff Basic", "t": "odd",
              "ft": "%topic%/%prefix%/", "rl": [1, 0, 0, 0, 0, 0, 0, 0], "lt_st": 0}  # fmt: skip
    heard = decoder().decode("tasmota/discovery/A4CF12340002/config", json.dumps(config).encode())
    assert [c.profile_id for c in heard.candidates] == [None]


def test_an_esphome_state_topic_abbreviated_with_a_tilde_is_expanded() -> None:
    config = {"~": "tank-node", "dev_cla": "humidity", "stat_t": "~/sensor/tank_rh/state",
              "dev": {"name": "tank-node", "sw": "esphome v2024.6.1"}}  # fmt: skip
    heard = decoder().decode(
        "homeassistant/sensor/tank-node/tank_rh/config", json.dumps(config).encode()
    )
    [candidate] = heard.candidates
    assert candidate.address["topic_base"] == "tank-node"
    assert candidate.address["variables"] == {"humidity": "tank_rh"}
