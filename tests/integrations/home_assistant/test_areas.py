"""Areas from Home Assistant's registries: an entity's own area, else its device's."""

from __future__ import annotations

from integrations.home_assistant.areas import Area, areas_of


def test_an_entity_is_in_its_own_area_else_in_its_devices() -> None:
    areas = [{"area_id": "rack_1", "name": "Rack 1"}, {"area_id": "room", "name": "Room"}]
    devices = [{"id": "d1", "area_id": "rack_1"}, {"id": "d2", "area_id": None}]
    entities = [
        {"entity_id": "light.a", "area_id": None, "device_id": "d1"},  # the device's
        {"entity_id": "light.b", "area_id": "room", "device_id": "d1"},  # its own wins
        {"entity_id": "fan.c", "area_id": None, "device_id": "d2"},  # nowhere
        {"entity_id": "fan.d", "area_id": "gone", "device_id": None},  # an unknown area
        "not a row",
    ]
    assert areas_of(areas, devices, entities) == {
        "light.a": Area("rack_1", "Rack 1"),
        "light.b": Area("room", "Room"),
    }
    assert areas_of(None, {"x": 1}, 3) == {}
