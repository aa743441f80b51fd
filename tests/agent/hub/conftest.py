"""A live agent on a private Mosquitto, as the control tests use it."""

from tests.agent.control.conftest import broker, rig

__all__ = ["broker", "rig"]
