"""The fake hub against a real Home Assistant: opt-in, never part of the default run.

Not collected by default (the file name does not start with ``test_``). Run it by naming it, with
``HA_VENV`` pointing at a virtualenv holding Home Assistant 2024.3.3 and what its ``demo``
integration and onboarding import:

    python3 -m venv /path/ha-venv
    /path/ha-venv/bin/pip install homeassistant==2024.3.3 'josepy<2'
    C=/path/ha-venv/lib/python3.11/site-packages/homeassistant/package_constraints.txt
    /path/ha-venv/bin/pip install -c $C Pillow==10.2.0 SQLAlchemy==2.0.27 fnv-hash-fast==0.5.0 \\
        hassil==1.6.1 home-assistant-intents==2024.3.12 psutil-home-assistant==0.0.1 janus \\
        home-assistant-frontend==20240307.0 numpy==1.26.0
    HA_VENV=/path/ha-venv .venv/bin/python -m pytest \\
        tests/integrations/home_assistant/against_home_assistant.py

It starts ``hass --skip-pip`` on a free loopback port with ``api``, ``websocket_api``,
``onboarding`` and ``demo``, creates a user and a long-lived token through the onboarding API,
then asks Home Assistant and the fake the same questions and compares the answers (status,
content type, body or its shape; the registries' row keys), and runs the shared hub client and
live stream (with areas) against Home Assistant. Without
``HA_VENV`` it fails, saying so: it is never skipped silently.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from integrations.home_assistant.areas import REGISTRY_COMMANDS
from integrations.home_assistant.client import HubClient
from integrations.home_assistant.errors import HubBadServiceData, HubEntityNotFound, HubUnauthorized
from integrations.home_assistant.fake import FakeHub
from integrations.home_assistant.live import HubStateStream
from integrations.home_assistant.settings import HubConfig
from tests.support.hub_fixtures import Serve
from tests.support.hub_fixtures import serve as serve

CONFIG = """homeassistant:
  name: Compare
  latitude: 52.0
  longitude: 13.0
  elevation: 0
  unit_system: metric
  time_zone: UTC
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
websocket_api:
onboarding:
demo:
"""
HA_LIGHT, FAKE_LIGHT = "light.bed_light", "light.grow_rack_1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def home_assistant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Home Assistant on a free port; yields its URL."""
    venv = os.environ.get("HA_VENV")
    if not venv:
        pytest.fail("set HA_VENV to a virtualenv with homeassistant==2024.3.3 (see the docstring)")
    config = tmp_path_factory.mktemp("ha-config")
    port = _free_port()
    (config / "configuration.yaml").write_text(CONFIG.format(port=port))
    log = (config / "hass.out").open("wb")
    process = subprocess.Popen(
        [str(Path(venv) / "bin" / "hass"), "--skip-pip", "-c", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        log.close()


_TOKENS: dict[str, str] = {}


async def _token(base: str) -> str:
    """Onboard the first user and make a long-lived access token (HA's onboarding and auth
    APIs, then the WebSocket command ``auth/long_lived_access_token``); once per instance."""
    if base not in _TOKENS:
        _TOKENS[base] = await _onboard(base)
    return _TOKENS[base]


async def _onboard(base: str) -> str:
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(240):
            while True:
                try:
                    async with session.get(base + "/api/onboarding") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(1)
        user = {
            "client_id": base + "/",
            "name": "Farm",
            "username": "farm",
            "password": "farm-compare-123",
            "language": "en",
        }
        async with session.post(base + "/api/onboarding/users", json=user) as resp:
            code = (await resp.json())["auth_code"]
        grant = {"grant_type": "authorization_code", "code": code, "client_id": base + "/"}
        async with session.post(base + "/auth/token", data=grant) as resp:
            access = (await resp.json())["access_token"]
        async with session.ws_connect(base + "/api/websocket") as ws:
            await ws.receive_json()
            await ws.send_json({"type": "auth", "access_token": access})
            assert (await ws.receive_json())["type"] == "auth_ok"
            await ws.send_json(
                {"id": 1, "type": "auth/long_lived_access_token", "client_name": "farm",
                 "lifespan": 30}
            )  # fmt: skip
            token: str = (await ws.receive_json())["result"]
            return token


def _shape(value: Any) -> Any:
    """What is compared of a body: the message or text itself; of a state, its keys."""
    if isinstance(value, list):
        return [_shape(item) for item in value[:1]]
    if isinstance(value, dict) and "entity_id" in value:
        return sorted(value)
    if isinstance(value, dict) and "version" in value:
        return sorted(value)
    return value


async def _answers(base: str, token: str, light: str) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {token}"}
    asked: list[tuple[str, str, str, dict[str, str], Any]] = [
        ("api", "GET", "/api/", auth, None),
        ("no token", "GET", "/api/", {}, None),
        ("wrong token", "GET", "/api/", {"Authorization": "Bearer nope"}, None),
        ("states", "GET", "/api/states", auth, None),
        ("unknown entity", "GET", "/api/states/sensor.nowhere_at_all", auth, None),
        ("config", "GET", "/api/config", auth, None),
        ("turn on", "POST", "/api/services/light/turn_on", auth, {"entity_id": light}),
        ("again", "POST", "/api/services/light/turn_on", auth, {"entity_id": light}),
        ("unknown target", "POST", "/api/services/light/turn_on", auth,
         {"entity_id": "light.nowhere_at_all"}),
        ("bad data", "POST", "/api/services/light/turn_on", auth,
         {"entity_id": light, "brightness_pct": 300}),
        ("unknown service", "POST", "/api/services/light/fly", auth, {"entity_id": light}),
        ("not json", "POST", "/api/services/light/turn_on", auth, b"{not json"),
        ("not an object", "POST", "/api/services/light/turn_on", auth, [1]),
        ("no target", "POST", "/api/services/light/turn_off", auth, None),
    ]  # fmt: skip
    answers: dict[str, Any] = {}
    async with aiohttp.ClientSession() as session:
        for name, method, path, headers, body in asked:
            kwargs: dict[str, Any] = {}
            if isinstance(body, bytes):
                kwargs["data"] = body
            elif body is not None:
                kwargs["json"] = body
            async with session.request(method, base + path, headers=headers, **kwargs) as resp:
                text = await resp.text()
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = text
                answers[name] = (resp.status, resp.content_type, _shape(parsed))
        conversation = []
        async with session.ws_connect(base + "/api/websocket") as ws:
            conversation.append(await ws.receive_json())
            await ws.send_json({"type": "auth", "access_token": "nope"})
            conversation.append(await ws.receive_json())
            conversation.append((await ws.receive()).type.name)
        async with session.ws_connect(base + "/api/websocket") as ws:
            conversation.append(await ws.receive_json())
            await ws.send_json({"type": "auth", "access_token": token})
            conversation.append(await ws.receive_json())
            await ws.send_json({"id": 1, "type": "subscribe_events", "event_type": "state_changed"})
            conversation.append(await ws.receive_json())
            await ws.send_json({"id": 2, "type": "no_such_command"})
            conversation.append(await ws.receive_json())
            for ident, kind in enumerate(REGISTRY_COMMANDS, 3):
                await ws.send_json({"id": ident, "type": kind})
                answer = await ws.receive_json()
                rows = answer.get("result") or [{}]
                conversation.append((answer["type"], answer["success"], sorted(rows[0])))
            await ws.send_json(
                {"id": 9, "type": "subscribe_events", "event_type": "entity_registry_updated"}
            )
            conversation.append(await ws.receive_json())
            toggle = {"entity_id": light}
            async with session.post(
                base + "/api/services/light/toggle", headers=auth, json=toggle
            ) as resp:
                await resp.read()
            while (event := await ws.receive_json(timeout=10))["type"] != "event":
                pass
            conversation.append(
                {
                    "keys": sorted(event),
                    "event": sorted(event["event"]),
                    "data": sorted(event["event"]["data"]),
                    "state": sorted(event["event"]["data"]["new_state"]),
                    "context id length": len(event["event"]["context"]["id"]),
                }
            )
        answers["websocket"] = conversation
    return answers


async def test_the_fake_answers_as_home_assistant_does(home_assistant: str, serve: Serve) -> None:
    token = await _token(home_assistant)
    real = await _answers(home_assistant, token, HA_LIGHT)
    fake = await _answers(await serve(FakeHub.sample("fake-token").app()), "fake-token", FAKE_LIGHT)
    assert fake == real


async def test_the_shared_client_classifies_home_assistants_answers(home_assistant: str) -> None:
    token = await _token(home_assistant)
    client = HubClient(HubConfig(enabled=True, url=home_assistant, token=token))
    wrong = HubClient(HubConfig(enabled=True, url=home_assistant, token="nope"))
    changes: list[Any] = []
    areas: list[Any] = []
    stream = HubStateStream(
        HubConfig(enabled=True, url=home_assistant, token=token),
        changes.append,
        on_areas=areas.append,
    )
    stream.start()
    try:
        assert await client.ping() == "API running."
        assert await client.version() == "2024.3.3"
        with pytest.raises(HubEntityNotFound):
            await client.state("sensor.nowhere_at_all")
        with pytest.raises(HubBadServiceData):
            await client.call_service("light", "turn_on", {"entity_id": HA_LIGHT, "x": "y"})
        with pytest.raises(HubUnauthorized):
            await wrong.states()
        async with asyncio.timeout(30):
            await stream.connected.wait()
        changed = await client.call_service("light", "toggle", {"entity_id": HA_LIGHT})
        assert [c["entity_id"] for c in changed] == [HA_LIGHT]
        async with asyncio.timeout(30):
            while not any(c["entity_id"] == HA_LIGHT for c in changes) or not areas:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert isinstance(areas[0], dict)  # the demo places no entity in an area
    finally:
        await stream.stop()
        await client.close()
        await wrong.close()
