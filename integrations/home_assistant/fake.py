"""A fake Home Assistant: REST and WebSocket APIs as Home Assistant documents and answers them.

REST (https://developers.home-assistant.io/docs/api/rest/): a Bearer long-lived token, else a
plain-text ``401: Unauthorized``; ``GET /api/`` -> ``{"message": "API running."}``; ``GET
/api/config``; ``GET /api/states``; ``GET /api/states/<entity_id>`` (404 ``{"message": "Entity not
found."}``); ``POST /api/services/<domain>/<service>`` answering the states that changed (an
unknown service, invalid service data, a body that is JSON but not an object, or a call without a
target is a plain ``400: Bad Request``; a body that is not JSON is ``{"message": "Data should be
valid JSON."}``; an unknown entity changes nothing and answers ``[]``). Checked against Home
Assistant 2024.3.3 by ``tests/integrations/home_assistant/against_home_assistant.py`` (opt-in;
docs/adr/0047-hub-integration.md).

WebSocket (https://developers.home-assistant.io/docs/api/websocket/): ``auth_required``, then
``auth`` -> ``auth_ok`` or ``auth_invalid`` (and the connection closes); ``subscribe_events``
(``state_changed``) -> a ``result`` then ``event`` messages with the old and new states.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

__all__ = ["FakeHub", "main"]

VERSION = "2024.3.3"


def _now() -> str:
    return datetime.now(UTC).isoformat()


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _ulid() -> str:
    """A context id as Home Assistant makes them since 2023.x: a ULID (26 Crockford base32
    characters: 48 bits of milliseconds, 80 random bits)."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def _state(entity_id: str, state: str, attributes: dict[str, Any]) -> dict[str, Any]:
    at = _now()
    return {
        "entity_id": entity_id,
        "state": state,
        "attributes": attributes,
        "last_changed": at,
        "last_updated": at,
        "context": {"id": _ulid(), "parent_id": None, "user_id": None},
    }


def sample_states() -> list[dict[str, Any]]:
    """A small greenhouse: lights, a fan, a pump switch, a valve and sensors."""
    return [
        _state(
            "light.grow_rack_1",
            "off",
            {
                "friendly_name": "Grow rack 1",
                "supported_color_modes": ["color_temp"],
                "color_mode": None,
                "brightness": None,
                "min_color_temp_kelvin": 2000,
                "max_color_temp_kelvin": 6500,
            },
        ),
        _state(
            "light.grow_rack_2",
            "on",
            {
                "friendly_name": "Grow rack 2",
                "brightness": 255,
                "supported_color_modes": ["brightness"],
            },
        ),
        _state("fan.exhaust", "off", {"friendly_name": "Exhaust fan", "percentage": 0}),
        _state("switch.nutrient_pump", "off", {"friendly_name": "Nutrient pump"}),
        _state(
            "valve.irrigation_zone_1",
            "closed",
            {
                "friendly_name": "Irrigation zone 1",
                "current_position": 0,
                "device_class": "water",
            },
        ),
        _state(
            "sensor.room_temperature",
            "22.4",
            {
                "friendly_name": "Room temperature",
                "unit_of_measurement": "°C",
                "device_class": "temperature",
                "state_class": "measurement",
            },
        ),
        _state(
            "sensor.room_humidity",
            "61",
            {
                "friendly_name": "Room humidity",
                "unit_of_measurement": "%",
                "device_class": "humidity",
                "state_class": "measurement",
            },
        ),
    ]


def _config(components: list[str]) -> dict[str, Any]:
    """``GET /api/config`` with the keys Home Assistant 2024.3 answers."""
    return {
        "latitude": 52.0,
        "longitude": 13.0,
        "elevation": 0,
        "unit_system": {
            "length": "km",
            "accumulated_precipitation": "mm",
            "mass": "g",
            "pressure": "Pa",
            "temperature": "°C",
            "volume": "L",
            "wind_speed": "m/s",
        },
        "location_name": "Fake hub",
        "time_zone": "UTC",
        "components": ["api", "http", "websocket_api", *components],
        "config_dir": "/config",
        "whitelist_external_dirs": [],
        "allowlist_external_dirs": [],
        "allowlist_external_urls": [],
        "version": VERSION,
        "config_source": "storage",
        "recovery_mode": False,
        "state": "RUNNING",
        "external_url": None,
        "internal_url": None,
        "currency": "EUR",
        "country": None,
        "language": "en",
        "safe_mode": False,
    }


class _BadData(Exception):
    """Service data Home Assistant's schema would refuse (vol.Invalid)."""


@dataclass
class FakeHub:
    """The hub's entities and the token it accepts; ``app()`` serves them."""

    token: str = "fake-hub-token"
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    #: While True the REST API answers 503, as a hub that is restarting behind its web server.
    unavailable: bool = False
    refused: int = 0
    #: Home Assistant keeps areas in its registries, not in states: area id -> name, entity id
    #: -> (area id, device id), device id -> area id.
    areas: dict[str, str] = field(default_factory=dict)
    entity_areas: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    device_areas: dict[str, str | None] = field(default_factory=dict)
    _subscribers: list[tuple[web.WebSocketResponse, int, str]] = field(default_factory=list)
    _sockets: set[web.WebSocketResponse] = field(default_factory=set)

    @classmethod
    def sample(cls, token: str = "fake-hub-token") -> FakeHub:
        hub = cls(token)
        for state in sample_states():
            hub.states[state["entity_id"]] = state
        hub.areas = {"rack_1": "Rack 1", "rack_2": "Rack 2", "room": "Room"}
        # The rack lights sit on devices placed in their racks; the rest are placed themselves.
        hub.device_areas = {"dev_light_rack_1": "rack_1", "dev_light_rack_2": "rack_2"}
        hub.entity_areas = {
            "light.grow_rack_1": (None, "dev_light_rack_1"),
            "light.grow_rack_2": (None, "dev_light_rack_2"),
            "fan.exhaust": ("room", None),
            "switch.nutrient_pump": ("room", None),
            "valve.irrigation_zone_1": ("rack_1", None),
            "sensor.room_temperature": ("room", None),
            "sensor.room_humidity": ("room", None),
        }
        return hub

    def set_area(self, entity_id: str, area_id: str | None) -> None:
        """Place an entity in an area, as a user does in the UI (``entity_registry_updated``)."""
        _, device = self.entity_areas.get(entity_id, (None, None))
        self.entity_areas[entity_id] = (area_id, device)
        self._fire(
            "entity_registry_updated",
            {"action": "update", "entity_id": entity_id, "changes": {"area_id": None}},
        )

    def add_sensors(self, count: int) -> None:
        """Add ``count`` temperature sensors (for benchmarks)."""
        for index in range(count):
            state = _state(
                f"sensor.bench_{index}",
                "20.0",
                {"unit_of_measurement": "°C", "device_class": "temperature"},
            )
            self.states[state["entity_id"]] = state

    def set_state(self, entity_id: str, state: str, **attributes: Any) -> dict[str, Any]:
        """Change an entity as a device would; subscribers get a ``state_changed`` event."""
        old = self.states.get(entity_id)
        new = _state(entity_id, state, {**(old or {}).get("attributes", {}), **attributes})
        if old is not None and old["state"] == state:
            new["last_changed"] = old["last_changed"]
        self.states[entity_id] = new
        self._fire(
            "state_changed",
            {"entity_id": entity_id, "old_state": old, "new_state": new},
            new["last_updated"],
            new["context"],
        )
        return new

    def _fire(
        self,
        event_type: str,
        data: dict[str, Any],
        at: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        event = {
            "event_type": event_type,
            "data": data,
            "origin": "LOCAL",
            "time_fired": at or _now(),
            "context": context or {"id": _ulid(), "parent_id": None, "user_id": None},
        }
        for ws, sub_id, wanted in tuple(self._subscribers):
            if not ws.closed and wanted == event_type:
                task = asyncio.ensure_future(
                    ws.send_json({"id": sub_id, "type": "event", "event": event})
                )
                task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def drop_websockets(self) -> None:
        """Close every WebSocket connection, as a hub restarting does."""
        for ws, _, _ in tuple(self._subscribers):
            await ws.close()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/", self._api)
        app.router.add_get("/api/config", self._config)
        app.router.add_get("/api/states", self._states)
        app.router.add_get("/api/states/{entity_id}", self._entity)
        app.router.add_post("/api/services/{domain}/{service}", self._service)
        app.router.add_get("/api/websocket", self._websocket)
        app.on_shutdown.append(self._shutdown)
        return app

    async def _shutdown(self, _app: web.Application) -> None:
        # Open WebSockets would otherwise hold the server's shutdown for its whole grace period.
        for ws in tuple(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY)

    # REST -----------------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        if self.unavailable:
            self.refused += 1
            raise web.HTTPServiceUnavailable()
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    @staticmethod
    def _unauthorized() -> web.Response:
        return web.Response(status=401, text="401: Unauthorized")

    async def _api(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response({"message": "API running."})

    async def _config(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response(_config(sorted({s.split(".")[0] for s in self.states})))

    async def _states(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response(list(self.states.values()))

    async def _entity(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        state = self.states.get(request.match_info["entity_id"])
        if state is None:
            return web.json_response({"message": "Entity not found."}, status=404)
        return web.json_response(state)

    async def _service(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        raw = await request.text()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return web.json_response({"message": "Data should be valid JSON."}, status=400)
        if not isinstance(data, dict):
            # Valid JSON that is not an object fails the service schema: a plain 400.
            raise web.HTTPBadRequest()
        domain, service = request.match_info["domain"], request.match_info["service"]
        self.calls.append((domain, service, data))
        try:
            changed = self._call(domain, service, data)
        except _BadData:
            raise web.HTTPBadRequest() from None
        return web.json_response(changed)

    def _call(self, domain: str, service: str, data: dict[str, Any]) -> list[dict[str, Any]]:
        handler = _SERVICES.get((domain, service))
        if handler is None:
            raise _BadData()  # ServiceNotFound: a 400 too
        if "entity_id" not in data:
            raise _BadData()  # entity services need a target (cv.has_at_least_one_key)
        ids = data["entity_id"]
        ids = [ids] if isinstance(ids, str) else ids
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise _BadData()
        changed = []
        for entity_id in ids:
            if entity_id.split(".")[0] != domain and domain != "homeassistant":
                continue
            old = self.states.get(entity_id)
            if old is None:
                continue
            state, attributes = handler(old, data)
            if (state, attributes) != (old["state"], {}):
                changed.append(self.set_state(entity_id, state, **attributes))
        return changed

    # WebSocket -------------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            return await self._converse(ws)
        finally:
            self._sockets.discard(ws)

    async def _converse(self, ws: web.WebSocketResponse) -> web.WebSocketResponse:
        await ws.send_json({"type": "auth_required", "ha_version": VERSION})
        try:
            auth = await ws.receive_json(timeout=10)
        except (TypeError, ValueError, TimeoutError):
            await ws.close()
            return ws
        if not isinstance(auth, dict) or auth.get("access_token") != self.token:
            await ws.send_json(
                {"type": "auth_invalid", "message": "Invalid access token or password"}
            )
            await ws.close()
            return ws
        await ws.send_json({"type": "auth_ok", "ha_version": VERSION})
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    await self._ws_command(ws, json.loads(message.data))
        finally:
            self._subscribers = [sub for sub in self._subscribers if sub[0] is not ws]
        return ws

    async def _ws_command(self, ws: web.WebSocketResponse, command: Any) -> None:
        if not isinstance(command, dict) or not isinstance(command.get("id"), int):
            return
        kind, ident = command.get("type"), command["id"]
        if kind == "subscribe_events":
            event_type = command.get("event_type", "*")
            self._subscribers.append((ws, ident, str(event_type)))
            await ws.send_json({"id": ident, "type": "result", "success": True, "result": None})
        elif kind in _REGISTRIES:
            result = _REGISTRIES[kind](self)
            await ws.send_json({"id": ident, "type": "result", "success": True, "result": result})
        elif kind == "ping":
            await ws.send_json({"id": ident, "type": "pong"})
        else:
            await ws.send_json(
                {
                    "id": ident,
                    "type": "result",
                    "success": False,
                    "error": {"code": "unknown_command", "message": "Unknown command."},
                }
            )


Handler = Any


def _area_list(hub: FakeHub) -> list[dict[str, Any]]:
    return [
        {"aliases": [], "area_id": area_id, "icon": None, "name": name, "picture": None}
        for area_id, name in hub.areas.items()
    ]


def _device_list(hub: FakeHub) -> list[dict[str, Any]]:
    return [
        {"area_id": area_id, "configuration_url": None, "config_entries": [], "connections": [],
         "disabled_by": None, "entry_type": None, "hw_version": None, "id": device_id,
         "identifiers": [["fake", device_id]], "manufacturer": "Fake", "model": None,
         "name_by_user": None, "name": device_id, "serial_number": None, "sw_version": None,
         "via_device_id": None}
        for device_id, area_id in hub.device_areas.items()
    ]  # fmt: skip


def _entity_list(hub: FakeHub) -> list[dict[str, Any]]:
    return [
        {"area_id": area_id, "config_entry_id": None, "device_id": device_id,
         "disabled_by": None, "entity_category": None, "entity_id": entity_id,
         "has_entity_name": False, "hidden_by": None, "icon": None, "id": entity_id,
         "labels": [], "name": None, "options": {}, "original_name": None,
         "platform": "fake", "translation_key": None, "unique_id": entity_id}
        for entity_id, (area_id, device_id) in hub.entity_areas.items()
    ]  # fmt: skip


#: The registry listings of Home Assistant's WebSocket API (the keys 2024.3 answers).
_REGISTRIES: dict[str, Any] = {
    "config/area_registry/list": _area_list,
    "config/device_registry/list": _device_list,
    "config/entity_registry/list": _entity_list,
}


def _on(_old: dict[str, Any], _data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "on", {}


def _off(_old: dict[str, Any], _data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "off", {}


def _toggle(old: dict[str, Any], _data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("off" if old["state"] == "on" else "on"), {}


def _percent(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise _BadData()
    return round(value)


def _light_on(_old: dict[str, Any], data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    attributes: dict[str, Any] = {}
    pct = _percent(data, "brightness_pct")
    if pct is not None:
        attributes["brightness"] = round(pct * 255 / 100)
    kelvin = data.get("color_temp_kelvin")
    if kelvin is not None:
        if isinstance(kelvin, bool) or not isinstance(kelvin, int) or not 1000 <= kelvin <= 20000:
            raise _BadData()
        attributes["color_temp_kelvin"] = kelvin
    if pct == 0:
        return "off", {}
    return "on", attributes


def _fan_pct(_old: dict[str, Any], data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    pct = _percent(data, "percentage")
    if pct is None:
        raise _BadData()
    return ("on" if pct else "off"), {"percentage": pct}


def _valve(state: str, position: int) -> Handler:
    def handler(_old: dict[str, Any], _data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return state, {"current_position": position}

    return handler


def _valve_position(_old: dict[str, Any], data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    pct = _percent(data, "position")
    if pct is None:
        raise _BadData()
    return ("open" if pct else "closed"), {"current_position": pct}


_SERVICES: dict[tuple[str, str], Handler] = {
    ("light", "turn_on"): _light_on,
    ("light", "turn_off"): _off,
    ("light", "toggle"): _toggle,
    ("switch", "turn_on"): _on,
    ("switch", "turn_off"): _off,
    ("switch", "toggle"): _toggle,
    ("fan", "turn_on"): _on,
    ("fan", "turn_off"): _off,
    ("fan", "set_percentage"): _fan_pct,
    ("homeassistant", "turn_on"): _on,
    ("homeassistant", "turn_off"): _off,
    ("valve", "open_valve"): _valve("open", 100),
    ("valve", "close_valve"): _valve("closed", 0),
    ("valve", "set_valve_position"): _valve_position,
}


def main(argv: list[str] | None = None) -> None:
    """Serve a sample fake hub (and, with ``--proxy-port``, the fake access proxy before it)."""
    from integrations.home_assistant.fake_proxy import FakeAccessProxy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--token", default="fake-hub-token")
    parser.add_argument("--proxy-port", type=int)
    parser.add_argument("--client-id", default="fake-client-id")
    parser.add_argument("--client-secret", default="fake-client-secret")
    parser.add_argument(
        "--entities", type=int, default=0, help="add temperature sensors up to this many entities"
    )
    args = parser.parse_args(argv)

    async def serve() -> None:
        hub = FakeHub.sample(args.token)
        hub.add_sensors(max(0, args.entities - len(hub.states)))
        runners = [web.AppRunner(hub.app())]
        await runners[0].setup()
        await web.TCPSite(runners[0], args.host, args.port).start()
        print(f"fake hub on http://{args.host}:{args.port}/ (token {args.token})", flush=True)
        if args.proxy_port:
            proxy = FakeAccessProxy(
                f"http://{args.host}:{args.port}", args.client_id, args.client_secret
            )
            runners.append(web.AppRunner(proxy.app()))
            await runners[1].setup()
            await web.TCPSite(runners[1], args.host, args.proxy_port).start()
            print(f"fake access proxy on http://{args.host}:{args.proxy_port}/", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            for runner in runners:
                await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
