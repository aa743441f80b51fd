"""The agent's own clock: whether it is synchronized, the cloud's time while it is not, and the
readings it stamped meanwhile moved once it is set (issue 30)."""

from agent.clock.agent_clock import AgentClock, Era
from agent.clock.probe import SyncProbe, probe_of, system_probe

__all__ = ["AgentClock", "Era", "SyncProbe", "probe_of", "system_probe"]
