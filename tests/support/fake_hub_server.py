"""The fake hub served on a real TCP port from a background thread (for non-async fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from integrations.home_assistant.fake import FakeHub
from tests.support.threaded_server import served_in_thread

__all__ = ["served_fake_hub"]


@contextmanager
def served_fake_hub(hub: FakeHub) -> Iterator[str]:
    """Serve ``hub`` on 127.0.0.1 with a free port until the block ends; yields its URL."""
    with served_in_thread(hub.app, name="fake-hub") as url:
        yield url
