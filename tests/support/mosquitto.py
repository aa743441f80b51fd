"""A private Mosquitto broker for tests: free port on 127.0.0.1, own config and persistence dir.

The broker process itself lives in ``agent.devices.broker_process`` (the demo uses it too).
"""

from __future__ import annotations

from pathlib import Path

from agent.devices.broker_process import MosquittoProcess, free_port

__all__ = ["INSTALL_HINT", "MOSQUITTO", "Mosquitto", "free_port"]

MOSQUITTO = Path("/usr/sbin/mosquitto")
INSTALL_HINT = "Mosquitto is required for these tests: apt-get install mosquitto"


class Mosquitto(MosquittoProcess):
    """A test broker; fails with an install hint when mosquitto is missing."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        try:
            super().__init__(workdir, port)
        except RuntimeError as err:
            raise RuntimeError(f"{err}. {INSTALL_HINT}") from None
