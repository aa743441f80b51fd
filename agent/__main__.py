"""``python -m agent`` runs the agent."""

from agent.cli import main

main()
