"""The ``farm-agent`` console script: Ctrl-C while Python is still importing the agent (a
second or more on a Raspberry Pi, before the agent handles signals itself) ends it quietly."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run ``farm-agent``; an interrupt before or outside the agent's handling exits with 130."""
    try:
        from agent.cli import main as run

        run()
    except KeyboardInterrupt:
        sys.exit(130)
