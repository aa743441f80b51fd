"""A real Home Assistant 2024.3.3 as a benchmark's peer, from a virtualenv outside the repository.

Make the virtualenv once (about two minutes from PyPI; docs/scaling.md):

    python3 -m venv ~/ha-venv
    ~/ha-venv/bin/pip install homeassistant==2024.3.3 'josepy<2'
    C=~/ha-venv/lib/python3.11/site-packages/homeassistant/package_constraints.txt
    ~/ha-venv/bin/pip install -c $C Pillow==10.2.0 SQLAlchemy==2.0.27 fnv-hash-fast==0.5.0 \\
        hassil==1.6.1 home-assistant-intents==2024.3.12 psutil-home-assistant==0.0.1 janus \\
        home-assistant-frontend==20240307.0 numpy==1.26.0

and pass it as ``HA_VENV`` (or ``--ha-venv``). Home Assistant runs with ``hass --skip-pip`` on a
free loopback port, with only ``api``, ``websocket_api`` and ``onboarding``; a user and a
long-lived token are made through the onboarding API (as
tests/integrations/home_assistant/against_home_assistant.py does), and the entities are states
posted through the REST API (``POST /api/states/<id>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.support import free_port
from tests.integrations.home_assistant.against_home_assistant import _onboard

__all__ = ["HomeAssistant", "home_assistant"]

CONFIG = """homeassistant:
  name: Bench
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
"""


@dataclass
class HomeAssistant:
    """A running Home Assistant: its address, a long-lived token and its process."""

    url: str
    token: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def home_assistant(venv: Path) -> Iterator[HomeAssistant]:
    """Start Home Assistant from ``venv``, onboard it; stop it and remove its config on exit."""
    hass = venv / "bin" / "hass"
    if not hass.exists():
        raise SystemExit(f"{hass} does not exist: make the virtualenv (bench/home_assistant.py)")
    config = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    port = free_port()
    (config / "configuration.yaml").write_text(CONFIG.format(port=port))
    with (config / "hass.out").open("wb") as log:
        process = subprocess.Popen(
            [str(hass), "--skip-pip", "-c", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        url = f"http://127.0.0.1:{port}"
        token = asyncio.run(_onboard(url))
        yield HomeAssistant(url, token, process)
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        shutil.rmtree(config, ignore_errors=True)


async def post_states(url: str, token: str, states: dict[str, tuple[str, dict[str, str]]]) -> None:
    """Create or change entities' states through the REST API (entity id -> state, attributes)."""
    auth = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        for entity_id, (state, attributes) in states.items():
            body = {"state": state, "attributes": attributes}
            async with session.post(f"{url}/api/states/{entity_id}", json=body, headers=auth):
                pass
