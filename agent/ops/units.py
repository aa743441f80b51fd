"""The agent's systemd unit as ``farm-agent install`` writes it (systemd/farm-agent.service)."""

from __future__ import annotations

from importlib import resources

__all__ = ["SHIPPED_EXECUTABLE", "UNIT_NAME", "render_agent_unit"]

UNIT_NAME = "farm-agent.service"
SHIPPED_EXECUTABLE = "/opt/farm-agent/bin/farm-agent"
"""Where docs/operations.md installs the agent; ``install`` points the unit at the real one."""


def render_agent_unit(executable: str) -> str:
    """The shipped unit with ``ExecStart=`` running ``executable``."""
    text = resources.files("agent.ops").joinpath(UNIT_NAME).read_text(encoding="utf-8")
    return text.replace(f"ExecStart={SHIPPED_EXECUTABLE} ", f"ExecStart={executable} ")
