"""The live agent on a private broker, as the runtime tests have it."""

from tests.agent.runtime.conftest import broker, farm, live

__all__ = ["broker", "farm", "live"]
