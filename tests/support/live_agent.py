"""An agent served on a real TCP port from a background thread, for clients that are not async."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.app import create_app
from protocol.http.server import EnvelopeAppRunner
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, agent_settings
from tests.support.threaded_server import served_in_thread


@dataclass
class LiveAgent:
    """Where the agent listens, and a way to get a fresh admin token."""

    base_url: str

    def login(self) -> str:
        """Log the admin in and return an access token."""
        body = json.dumps({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).encode()
        req = urllib.request.Request(
            self.base_url + "/api/v1/login",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(json.loads(resp.read())["access_token"])


@contextmanager
def live_agent(state_dir: Path, **overrides: Any) -> Iterator[LiveAgent]:
    """Run an agent on 127.0.0.1 with a free port until the block ends."""
    settings = agent_settings(state_dir, **overrides)
    with served_in_thread(
        lambda: create_app(settings), name="live-agent", runner_class=EnvelopeAppRunner
    ) as url:
        yield LiveAgent(url)
