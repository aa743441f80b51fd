"""Stopping the agent (Ctrl-C, SIGTERM) whatever it is doing, its first demo start included:
the process ends by itself, quickly, without a traceback, and the state opens again."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.agent_process import AgentProcess

# Lines the demo's first start logs, in order: a stop may come at any of them.
_FIRST_START = {
    "creating the sample farm": "First admin:",
    "binding the simulated devices": "device runtime started",
    "writing the week of history": "simulated devices on farm",
    "serving": "Sign in:",
}


def _demo(tmp_path: Path) -> AgentProcess:
    """The demo as ``scripts/demo`` runs it: sample farm, simulated devices, private broker."""
    return AgentProcess(
        tmp_path / "state-demo",
        {"FARM_LOG_LEVEL": "INFO"},
        args=("--sample-data", "--simulate"),
    )


@pytest.mark.parametrize(
    ("signum", "moment"),
    [
        *((signal.SIGINT, moment) for moment in _FIRST_START),  # Ctrl-C in the demo's terminal
        (signal.SIGTERM, "creating the sample farm"),  # systemctl stop, early and late
        (signal.SIGTERM, "serving"),
    ],
    ids=lambda value: value.name if isinstance(value, signal.Signals) else value,
)
async def test_a_stop_during_the_first_demo_start_is_clean(
    tmp_path: Path, moment: str, signum: int
) -> None:
    agent = _demo(tmp_path)
    agent.spawn()
    await agent.logged(_FIRST_START[moment])
    # The bound is a hang detector, not a benchmark: a clean stop takes well under a second.
    assert agent.interrupt(signum, timeout=20) == 0
    output = agent.log.read_text()
    assert "Traceback" not in output, output
    assert " ERROR " not in output, output
    await agent.start()  # the state it left opens again
    agent.stop()
