"""``python -m agent`` runs the agent."""

from agent.entry import main

main()
